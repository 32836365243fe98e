// libFuzzer target: conversation recognition, intake and compaction with summaries under the
// isolation invariant. The clients of fuzzed_clients.h (two API keys; continuing, retrying,
// editing, dropping their oldest turns, forking each other's histories, with clock lines and
// ids that change, explicit ids shared across clients and keys) send their requests through
// MiniGateway (testing/isolation_oracle.h): the session library's recognition, intake,
// compaction and view, as a chat turn runs them, with a store in memory, a tiny memory
// (evictions) and compactions that write summaries (traceable_summary: one line per message
// summarised, so the oracle can trace each).
//
// session_recognition_fuzz drives the real chat turn with the same clients; this target stays
// for what the turn cannot do without an engine: write summaries (the turn's scripted engine,
// testing::TurnDriver, compacts by truncating and dropping only), and find evicted sessions
// again in a store.
//
// Nothing may crash, every upstream view must pass IsolationOracle (nothing from another
// conversation, the current values reach the model), a conversation that sends our reply
// back with one more message is recognised as itself, and the table stays within its bound.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "fuzzed_clients.h"
#include "session/normalize.h"
#include "session/session.h"
#include "testing/isolation_oracle.h"
#include "util/json.h"

namespace {

using nlohmann::json;
using namespace kvgate::session;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const size_t max_sessions = in.ConsumeIntegralInRange<size_t>(1, 4);
  const uint64_t high = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<uint64_t>(200, 2000);
  kvgate::testing::MiniGateway gw(max_sessions, high);
  kvgate::testing::IsolationOracle oracle;
  kvgate::fuzzing::FuzzedClients clients(in);
  for (int step = 0; step < 40 && in.remaining_bytes() > 0; ++step) {
    kvgate::fuzzing::FuzzedClient& cl = clients.next_request(step);
    const json request = cl.history;
    const json reply = clients.assistant_message();
    auto t = gw.send(cl.scope, cl.id, request, reply);
    check(t.session != nullptr);
    check(t.how == "header" || t.how == "prefix" || t.how == "window" || t.how == "new");
    if (auto e = oracle.check(cl.scope, cl.id, request, t.view); !e.empty()) {
      std::fprintf(stderr, "isolation: %s\nrequest: %s\nview: %s\n", e.c_str(),
                   kvgate::util::json_text(request).substr(0, 4000).c_str(),
                   kvgate::util::json_text(t.view).substr(0, 4000).c_str());
      std::abort();
    }
    oracle.answered(cl.scope, cl.id, request, reply);
    cl.history.push_back(reply);
    // The client's next request with the reply: recognised as its conversation, by prefix
    // (this session, or one that holds the same messages), or as a later window of this session
    // when the client had dropped its oldest turns (the conversation keeps their place: its
    // chain starts before the client's).
    if (!cl.id) {
      json next = cl.history;
      next.push_back({{"role", "user"}, {"content", "and then?"}});
      auto again = gw.table().find_or_create(cl.scope, RequestKeys::of(next), std::nullopt);
      const bool window_of_this = again.how == "window" && again.session == t.session;
      check(window_of_this || again.how == "prefix");
      if (!window_of_this) {
        std::lock_guard lock(again.session->mu);
        const size_t n = cl.history.size();
        check(again.session->chain.size() >= n &&
              again.session->chain[n - 1] == chain_hashes(cl.history).back());
      }
    }
    check(gw.table().size() <= max_sessions + 1);  // + the one a request may still hold
  }
  return 0;
}
