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

}  // namespace
}  // namespace kvgate::util
