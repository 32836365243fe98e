#include "util/result.h"

#include <gtest/gtest.h>

#include <memory>

namespace kvgate::util {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return Error("not positive: " + std::to_string(x));
  return x;
}

Result<int> doubled(int x) {
  KV_ASSIGN_OR_RETURN(int v, parse_positive(x));
  return v * 2;
}

Status check(int x) {
  KV_TRY(parse_positive(x));
  return {};
}

TEST(ResultTest, ValueAndError) {
  auto good = doubled(4);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "not positive: -1");
}

TEST(ResultTest, StatusPropagates) {
  EXPECT_TRUE(check(1).ok());
  Status s = check(0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "not positive: 0");
}

TEST(ResultTest, ContextIsPrepended) {
  auto r = parse_positive(-2).with_context("reading x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "reading x: not positive: -2");
  Status s = Status(Error("inner")).with_context("outer");
  EXPECT_EQ(s.error().message(), "outer: inner");
}

TEST(ResultTest, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

// An error type other than Error: a status and a field, as a wire format answers a client.
struct FieldError {
  int status;
  std::string field;
};

Result<int, FieldError> field_value(int x) {
  if (x < 0) return FieldError{400, "x"};
  return x;
}

Result<int, FieldError> field_sum(int a, int b) {
  KV_ASSIGN_OR_RETURN(int va, field_value(a));
  KV_ASSIGN_OR_RETURN(int vb, field_value(b));
  return va + vb;
}

Result<void, FieldError> field_check(int x) {
  KV_TRY(field_value(x));
  return {};
}

TEST(ResultTest, OtherErrorTypesPropagate) {
  auto good = field_sum(1, 2);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  auto bad = field_sum(1, -2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().status, 400);
  EXPECT_EQ(bad.error().field, "x");
  EXPECT_TRUE(field_check(0).ok());
  auto s = field_check(-1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().status, 400);
}

}  // namespace
}  // namespace kvgate::util
