// The isolation invariant on the real chat turn: the families of colliding clients of the
// session-level property test (testing/client_families.h), every request through a Gateway
// (TurnDriver: parsing, recognition, intake, compaction, the send to a scripted engine) and
// every view the turn sent upstream checked by IsolationOracle.
#include <gtest/gtest.h>

#include "gateway/gateway.h"
#include "testing/turn_driver.h"

namespace kvgate::testing {
namespace {

using nlohmann::json;

// The compactions a gateway made so far (its Prometheus text).
uint64_t compactions(gateway::Gateway& g) {
  const std::string text = g.metrics().prometheus();
  uint64_t n = 0;
  for (size_t at = text.find("\nkvgate_compactions_total{"); at != std::string::npos;
       at = text.find("\nkvgate_compactions_total{", at + 1)) {
    const size_t value = text.find("} ", at);
    if (value != std::string::npos) n += std::stoull(text.substr(value + 2));
  }
  return n;
}

TEST(IsolationTurnPropertyTest, CollidingConversationsNeverMixThroughTheTurn) {
  int requests = 0;
  size_t continuations = 0;
  uint64_t compacted = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    ClientFamilies f(seed);
    const int steps = 12 + static_cast<int>(seed % 13);
    // A quarter compact (a small budget: truncations and dropped turns).
    TurnDriver driver(
        {.max_sessions = f.small_table() ? 3u : 1024u, .high_tokens = seed % 4 == 0 ? 900u : 0u});
    const std::string failure = f.run(steps, [&](const std::string& key, const std::optional<std::string>& id,
                                                 const json& messages, const json& reply) {
      TurnDriver::Result r = driver.send(key, id, messages, reply);
      EXPECT_EQ(r.status, 200) << "seed " << seed << ": " << r.sent.detail;
      EXPECT_TRUE(r.sent.view.is_array() && !r.sent.view.empty()) << "seed " << seed << ": nothing was sent";
      return r.sent;
    });
    ASSERT_EQ(failure, "") << "seed " << seed;
    requests += steps;
    continuations += f.continuations;
    compacted += compactions(driver.gateway());
  }
  EXPECT_GT(compacted, 50u);  // the compacting cases compact
  RecordProperty("requests", requests);
  RecordProperty("continuations", static_cast<int>(continuations));
  RecordProperty("compactions", static_cast<int>(compacted));
}

}  // namespace
}  // namespace kvgate::testing
