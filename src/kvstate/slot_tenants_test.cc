#include "kvstate/slot_tenants.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/upstream_double.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

TEST(SlotTenantsTest, ASlotIsForeignToEveryKeyButTheOneWhoseContentItHolds) {
  SlotTenants t(2, true);
  // Nothing sent yet: what the slots hold is not known (kvgate may have restarted).
  EXPECT_TRUE(t.foreign(0, "a"));
  EXPECT_TRUE(t.foreign(1, "b"));
  t.hold(0, "a");
  EXPECT_FALSE(t.foreign(0, "a"));
  EXPECT_TRUE(t.foreign(0, "b"));
  EXPECT_TRUE(t.foreign(1, "a"));
  t.hold(0, "b");
  EXPECT_TRUE(t.foreign(0, "a"));
  EXPECT_FALSE(t.foreign(0, "b"));
  t.forget(0);
  EXPECT_TRUE(t.foreign(0, "b"));
  EXPECT_TRUE(t.foreign(7, "b"));  // not a slot of this engine
  EXPECT_TRUE(t.foreign(-1, "b"));
}

TEST(SlotTenantsTest, OneScopeHasNothingToKeepApart) {
  SlotTenants t(2, false);
  EXPECT_FALSE(t.isolating());
  EXPECT_FALSE(t.foreign(0, "a"));
  t.hold(0, "a");
  EXPECT_FALSE(t.foreign(0, "b"));
}

// An engine that answers the slot erase action with `erase_status` and a completion with
// `completion_status`, recording what it was asked.
class SlotEngine : public testing::UpstreamDouble {
 public:
  SlotEngine(int erase_status, int completion_status)
      : erase_(erase_status), completion_(completion_status) {}
  EngineEndpoint endpoint() override { return {.available = true}; }

 private:
  UpstreamResult<UpstreamResponse> answer(const Request& r) override {
    const int status = r.path.starts_with("/slots/") ? erase_ : completion_;
    if (status == 0) return UpstreamError{.kind = UpstreamFailure::kConnect, .message = "connection refused"};
    return UpstreamResponse{.status = status,
                            .body = status == 200 ? "{}" : "{\"error\":{\"message\":\"no\"}}"};
  }
  int erase_, completion_;
};

TEST(SlotTenantsTest, ClearingErasesTheSlotOrOverwritesItWithoutTheCache) {
  SlotEngine with_actions(200, 200);
  auto erased = clear_slot(with_actions, 3);
  ASSERT_TRUE(erased.ok());
  EXPECT_EQ(*erased, SlotClear::kErased);
  ASSERT_EQ(with_actions.calls().size(), 1u);
  EXPECT_EQ(with_actions.calls()[0].path, "/slots/3?action=erase");

  // No slot actions (an engine without --slot-save-path answers 501): one token on the slot,
  // nothing of its cache reused.
  SlotEngine without_actions(501, 200);
  auto overwritten = clear_slot(without_actions, 1);
  ASSERT_TRUE(overwritten.ok());
  EXPECT_EQ(*overwritten, SlotClear::kOverwritten);
  const auto asked = without_actions.calls();
  ASSERT_EQ(asked.size(), 2u);
  const json& body = asked[1].body;
  EXPECT_EQ(asked[1].path, "/completion");
  EXPECT_EQ(body["id_slot"], 1);
  EXPECT_EQ(body["cache_prompt"], false);

  SlotEngine gone(0, 0);
  auto failed = clear_slot(gone, 0);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message().find("slot 0 could not be cleared"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::gateway
