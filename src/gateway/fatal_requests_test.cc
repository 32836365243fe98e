#include "gateway/fatal_requests.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

TEST(FatalRequestsTest, ARequestAloneWithAnEngineThatHungIsFatalAtOnce) {
  FatalRequests f;
  const uint64_t d = FatalRequests::digest("{\"grammar\":\"...\"}");
  {
    auto token = f.enter(d);
    EXPECT_FALSE(f.fatal(d));
    EXPECT_EQ(f.engine_lost(true), 1u);
  }
  EXPECT_TRUE(f.fatal(d));
  EXPECT_FALSE(f.fatal(FatalRequests::digest("{\"grammar\":\"..\"}")));
}

TEST(FatalRequestsTest, RequestsInFlightTogetherNeedTwoLossesAndReleasedOnesNone) {
  FatalRequests f;
  const uint64_t a = FatalRequests::digest("a"), b = FatalRequests::digest("b"),
                 c = FatalRequests::digest("c");
  auto ta = f.enter(a);
  auto tb = f.enter(b);
  { auto tc = f.enter(c); }  // answered before the loss
  EXPECT_EQ(f.engine_lost(true), 0u);
  EXPECT_FALSE(f.fatal(a));
  EXPECT_FALSE(f.fatal(b));
  tb.release();
  EXPECT_EQ(f.engine_lost(false), 1u);  // a's second loss
  EXPECT_TRUE(f.fatal(a));
  EXPECT_FALSE(f.fatal(b));
  EXPECT_FALSE(f.fatal(c));
}

TEST(FatalRequestsTest, NoRequestInFlightNoStrikeAndMemoryIsBounded) {
  FatalRequests f(2);
  EXPECT_EQ(f.engine_lost(true), 0u);
  for (const char* body : {"1", "2", "3"}) {
    auto t = f.enter(FatalRequests::digest(body));
    f.engine_lost(true);
  }
  EXPECT_FALSE(f.fatal(FatalRequests::digest("1")));  // the oldest is forgotten
  EXPECT_TRUE(f.fatal(FatalRequests::digest("2")));
  EXPECT_TRUE(f.fatal(FatalRequests::digest("3")));
}

TEST(FatalRequestsTest, ARequestAloneWithAnEngineThatDiedIsFatalOnlyTheSecondTime) {
  FatalRequests f;
  const uint64_t d = FatalRequests::digest("{}");
  auto t = f.enter(d);
  EXPECT_EQ(f.engine_lost(false), 0u);  // crashed or killed from outside: maybe not its fault
  EXPECT_FALSE(f.fatal(d));
  EXPECT_EQ(f.engine_lost(false), 1u);
  EXPECT_TRUE(f.fatal(d));
}

TEST(FatalRequestsTest, TheAnswersSayWhyAndDiffer) {
  EXPECT_EQ(fatal_request_error(false).status, 502);
  EXPECT_EQ(fatal_request_error(true).status, 400);
  EXPECT_EQ(fatal_request_error(true).code, "request_stopped_engine");
}

}  // namespace
}  // namespace kvgate::gateway
