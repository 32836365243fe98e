// libFuzzer target: the real chat turn's recognition, intake and compaction under the
// isolation invariant. The clients of fuzzed_clients.h (two API keys; continuing, retrying,
// editing, dropping their oldest turns, forking each other's histories, with clock lines and
// ids that change, explicit ids shared across clients and keys) send their requests to a
// Gateway through testing::TurnDriver: each goes through the whole turn (head checks,
// parsing, repair, recognition, intake, compaction past a small high watermark, the send to
// a scripted engine) with 1-4 sessions in memory. Each client carries back the answer it
// received, or now and then its own version of the turn.
//
// Checked: no request is a server error (5xx) and none that the turn's first step refuses is
// answered; every view the turn sent upstream passes IsolationOracle against the request as
// that first step left it (TurnDriver::prepared: nothing from another conversation or key,
// the current values reach the model); a client's next request carrying the answer is
// recognised as a prefix of the conversation it continues; the table stays within its
// bound. Summaries need an engine that writes them: session_summary_fuzz drives the same
// clients through MiniGateway, whose compactions write them.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "fuzzed_clients.h"
#include "gateway/gateway.h"
#include "session/normalize.h"
#include "session/session.h"
#include "testing/isolation_oracle.h"
#include "testing/turn_driver.h"
#include "util/json.h"
#include "util/log.h"

namespace {

using nlohmann::json;
using namespace kvgate;

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "session_recognition_fuzz: %s\n", what);
  std::abort();
}

// The client's next request, the answer it received and one more user message: recognised
// as the conversation `served` (the session that answered) holds, by prefix (that session, or
// one that holds the same messages), or as a later window of `served` when the client had
// dropped its oldest turns (the conversation then keeps them: its chain starts before the
// client's).
void check_recognised_next(testing::TurnDriver& driver, const fuzzing::FuzzedClient& client,
                           const std::shared_ptr<session::Session>& served) {
  json next = client.history;
  next.push_back({{"role", "user"}, {"content", "and then?"}});
  const std::optional<json> prepared = driver.prepared(next);
  check(prepared.has_value(), "the answer, sent back with a plain message, is refused");
  auto again = driver.gateway().sessions().find_or_create(client.scope, session::RequestKeys::of(*prepared),
                                                          std::nullopt);
  if (again.how == "window" && again.session == served) return;
  check(again.how == "prefix", "the next request is not recognised as its conversation");
  const size_t n = prepared->size() - 1;  // the messages the client has seen
  std::lock_guard lock(again.session->mu);
  check(again.session->chain.size() >= n &&
            again.session->chain[n - 1] == session::chain_hashes(*prepared)[n - 1],
        "the recognised session does not hold the conversation the client has seen");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  util::set_log_level(util::LogLevel::kError);  // the turn's log lines: not the fuzzer's output
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const size_t max_sessions = in.ConsumeIntegralInRange<size_t>(1, 4);
  const uint64_t high = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<uint64_t>(200, 2000);
  testing::TurnDriver driver({.max_sessions = max_sessions, .high_tokens = high});
  testing::IsolationOracle oracle;
  fuzzing::FuzzedClients clients(in);
  for (int step = 0; step < 40 && in.remaining_bytes() > 0; ++step) {
    fuzzing::FuzzedClient& cl = clients.next_request(step);
    const std::optional<json> prepared = driver.prepared(cl.history);
    const testing::TurnDriver::Result r = driver.send(cl.key, cl.id, cl.history, clients.assistant_message());
    check(r.status < 500, "a server error");
    check(prepared || r.status != 200, "a request the first step refuses was answered");
    if (r.status != 200) {
      cl.history.erase(cl.history.size() - 1);  // refused: the client gives up its new message
      continue;
    }
    check(r.sent.view.is_array() && !r.sent.view.empty(), "answered, but nothing was sent upstream");
    check(r.reply.is_object(), "answered without a message");
    if (auto e = oracle.check(cl.scope, cl.id, *prepared, r.sent.view); !e.empty()) {
      std::fprintf(stderr, "isolation: %s\nrequest: %s\nview: %s\n", e.c_str(),
                   util::json_text(*prepared).substr(0, 4000).c_str(),
                   util::json_text(r.sent.view).substr(0, 4000).c_str());
      std::abort();
    }
    oracle.answered(cl.scope, cl.id, *prepared, r.reply);
    const auto mine = driver.gateway().sessions().list(cl.scope);  // the most recently used first
    check(!mine.empty(), "answered, but the request's key has no session");
    const std::shared_ptr<session::Session> served = mine.front();
    const bool own_version = in.ConsumeIntegralInRange<int>(0, 7) == 0;
    cl.history.push_back(own_version ? clients.assistant_message() : r.reply);
    if (!cl.id && !own_version) check_recognised_next(driver, cl, served);
    check(driver.gateway().sessions().size() <= max_sessions + 1, "the table passed its bound");
  }
  return 0;
}
