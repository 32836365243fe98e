// libFuzzer target: conversation recognition and intake under the isolation invariant. The
// input drives a sequence of requests from a few clients of two API keys (continuing,
// retrying, editing, dropping their oldest turns, forking each other's histories, with clock
// lines and ids that change, explicit ids shared across clients and keys) through
// MiniGateway — the gateway's own recognition, intake, compaction and view, with a store in
// memory and a tiny memory (evictions). Nothing may crash, every upstream view must pass
// IsolationOracle (nothing from another conversation, the current values reach the model),
// a conversation that sends our reply back with one more message is recognised as itself,
// and the table stays within its bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "session/normalize.h"
#include "session/session.h"
#include "testing/isolation_oracle.h"

namespace {

using nlohmann::json;
using namespace kvgate::session;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string piece(FuzzedDataProvider& in) {
  static const char* kParts[] = {"Current time: 2026-11-29 10:0",
                                 "request id 550e8400-e29b-41d4-a716-44665544000",
                                 "deadbeefcafebabe1234",
                                 "the sea",
                                 "and the mountains",
                                 "12345678901",
                                 "\n",
                                 " ",
                                 "tool",
                                 "{\"a\":1}",
                                 "é",
                                 "\xff"};
  std::string s;
  const int n = in.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < n; ++i) {
    if (in.ConsumeBool()) {
      s += kParts[in.ConsumeIntegralInRange<size_t>(0, std::size(kParts) - 1)];
    } else {
      s += in.ConsumeRandomLengthString(24);
    }
  }
  return s;
}

json message(FuzzedDataProvider& in, const char* role) {
  json m = {{"role", role}};
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      m["content"] = nullptr;
      m["tool_calls"] = json::array({{{"id", piece(in)},
                                      {"type", "function"},
                                      {"function", {{"name", piece(in)}, {"arguments", piece(in)}}}}});
      break;
    case 1:
      m["content"] =
          json::array({{{"type", "text"}, {"text", piece(in)}}, {{"type", "text"}, {"text", piece(in)}}});
      break;
    case 2:
      m["content"] = piece(in);
      m["reasoning_content"] = piece(in);
      break;
    default:
      m["content"] = piece(in);
  }
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const size_t max_sessions = in.ConsumeIntegralInRange<size_t>(1, 4);
  const uint64_t high = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<uint64_t>(200, 2000);
  kvgate::testing::MiniGateway gw(max_sessions, high);
  kvgate::testing::IsolationOracle oracle;
  const std::string scopes[] = {scope_of_key("key-1"), scope_of_key("key-2")};
  // Up to 4 clients, each its own message list, key and maybe id.
  struct Client {
    std::string scope;
    std::optional<std::string> id;
    json history = json::array();
  };
  std::vector<Client> clients(4);
  for (auto& c : clients) {
    c.scope = scopes[in.ConsumeIntegralInRange<int>(0, 1)];
    if (in.ConsumeIntegralInRange<int>(0, 3) == 0) c.id = "client-" + std::to_string(in.ConsumeIntegralInRange<int>(0, 1));
    c.history.push_back({{"role", "system"}, {"content", "You help. " + piece(in)}});
  }
  for (int step = 0; step < 40 && in.remaining_bytes() > 0; ++step) {
    Client& cl = clients[in.ConsumeIntegralInRange<size_t>(0, clients.size() - 1)];
    json& c = cl.history;
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:  // the client edits a message
        if (c.size() > 1) c[in.ConsumeIntegralInRange<size_t>(1, c.size() - 1)]["content"] = piece(in);
        break;
      case 1:  // the client drops its oldest turn (keeps the system message)
        if (c.size() > 3) c.erase(1);
        break;
      case 2:  // the system message's clock line moves on
        c[0]["content"] = "You help. Current time: 2026-11-29 10:0" + std::to_string(step % 10) + ":00";
        break;
      case 3:  // a retry: the last assistant reply is dropped
        if (c.size() > 2 && c.back().value("role", "") == "assistant") c.erase(c.size() - 1);
        break;
      case 4:  // another client's history, forked
        c = clients[in.ConsumeIntegralInRange<size_t>(0, clients.size() - 1)].history;
        break;
      default:
        break;
    }
    c.push_back(message(in, in.ConsumeBool() ? "user" : "tool"));
    const json request = c;
    const json reply = message(in, "assistant");
    auto t = gw.send(cl.scope, cl.id, request, reply);
    check(t.session != nullptr);
    check(t.how == "header" || t.how == "prefix" || t.how == "window" || t.how == "new");
    if (auto e = oracle.check(cl.scope, cl.id, request, t.view); !e.empty()) {
      std::fprintf(stderr, "isolation: %s\n", e.c_str());
      std::abort();
    }
    oracle.answered(cl.scope, cl.id, request, reply);
    c.push_back(reply);
    // The client's next request with the reply: recognised as the same session.
    if (!cl.id) {
      json next = c;
      next.push_back({{"role", "user"}, {"content", "and then?"}});
      auto again = gw.table().find_or_create(cl.scope, RequestKeys::of(next), std::nullopt);
      check(again.how == "prefix");  // this session, or one that holds the same conversation
      std::lock_guard lock(again.session->mu);
      check(again.session->chain.size() >= c.size() && again.session->chain[c.size() - 1] == chain_hashes(c).back());
    }
    check(gw.table().size() <= max_sessions + 1);  // + the one a request may still hold
  }
  return 0;
}
