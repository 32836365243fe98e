#include "gateway/fatal_requests.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

TEST(FatalRequestsTest, ARequestAloneWithTheLostEngineIsFatalAtOnce) {
  FatalRequests f;
  const uint64_t d = FatalRequests::digest("{\"grammar\":\"...\"}");
  {
    auto token = f.enter(d);
    EXPECT_FALSE(f.fatal(d));
    EXPECT_EQ(f.engine_lost(), 1u);
  }
  EXPECT_TRUE(f.fatal(d));
  EXPECT_FALSE(f.fatal(FatalRequests::digest("{\"grammar\":\"..\"}")));
}

TEST(FatalRequestsTest, RequestsInFlightTogetherNeedTwoLossesAndReleasedOnesNone) {
  FatalRequests f;
  const uint64_t a = FatalRequests::digest("a"), b = FatalRequests::digest("b"), c = FatalRequests::digest("c");
  auto ta = f.enter(a);
  auto tb = f.enter(b);
  { auto tc = f.enter(c); }  // answered before the loss
  EXPECT_EQ(f.engine_lost(), 0u);
  EXPECT_FALSE(f.fatal(a));
  EXPECT_FALSE(f.fatal(b));
  tb.release();
  EXPECT_EQ(f.engine_lost(), 1u);  // a, alone now, takes its second and third strike
  EXPECT_TRUE(f.fatal(a));
  EXPECT_FALSE(f.fatal(b));
  EXPECT_FALSE(f.fatal(c));
}

TEST(FatalRequestsTest, NoRequestInFlightNoStrikeAndMemoryIsBounded) {
  FatalRequests f(2);
  EXPECT_EQ(f.engine_lost(), 0u);
  for (const char* body : {"1", "2", "3"}) {
    auto t = f.enter(FatalRequests::digest(body));
    f.engine_lost();
  }
  EXPECT_FALSE(f.fatal(FatalRequests::digest("1")));  // the oldest is forgotten
  EXPECT_TRUE(f.fatal(FatalRequests::digest("2")));
  EXPECT_TRUE(f.fatal(FatalRequests::digest("3")));
}

TEST(FatalRequestsTest, TheAnswersSayWhyAndDiffer) {
  EXPECT_EQ(fatal_request_error(false).status, 502);
  EXPECT_EQ(fatal_request_error(true).status, 400);
  EXPECT_EQ(fatal_request_error(true).code, "request_stopped_engine");
}

}  // namespace
}  // namespace kvgate::gateway
