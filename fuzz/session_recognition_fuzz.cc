// libFuzzer target: conversation recognition. The input drives a sequence of requests from a
// few conversations (continuing, retrying, editing, dropping their oldest turns, with clock
// lines and ids that change every turn, explicit session ids) against a SessionTable with a
// tiny memory (evictions) backed by an in-memory store (sessions come back by their keys).
// Nothing may crash, and every match must be sound: a "prefix" match's session really holds
// that prefix, the table stays within its bound, the keys of a session point to it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "gateway/normalize.h"
#include "gateway/session.h"

namespace {

using nlohmann::json;
using namespace kvgate::gateway;

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

struct Store {
  std::map<uint64_t, std::string> keys;
  std::map<std::string, Conversation> sessions;
  std::map<std::string, size_t> request_messages;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Store store;
  const size_t max_sessions = in.ConsumeIntegralInRange<size_t>(1, 4);
  SessionTable table(max_sessions);
  table.set_loader({.find = [&store](uint64_t key) -> std::optional<std::string> {
                      auto it = store.keys.find(key);
                      return it == store.keys.end() ? std::nullopt : std::optional<std::string>(it->second);
                    },
                    .load = [&store](const std::string& id) -> std::shared_ptr<Session> {
                      auto it = store.sessions.find(id);
                      if (it == store.sessions.end()) return nullptr;
                      auto s = std::make_shared<Session>(id);
                      s->conversation = it->second;
                      s->chain = it->second.chain;
                      s->last_request_messages = store.request_messages[id];
                      return s;
                    }});
  // Up to 4 client conversations, each its own message list.
  std::vector<json> clients(4, json::array());
  for (auto& c : clients) c.push_back({{"role", "system"}, {"content", "You help. " + piece(in)}});
  for (int step = 0; step < 40 && in.remaining_bytes() > 0; ++step) {
    json& c = clients[in.ConsumeIntegralInRange<size_t>(0, clients.size() - 1)];
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
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
      default:
        break;
    }
    c.push_back(message(in, in.ConsumeBool() ? "user" : "tool"));
    const auto chain = chain_hashes(c);
    std::vector<uint64_t> hashes;
    for (const auto& m : c) hashes.push_back(message_hash(m));
    check(chain.size() == c.size());
    std::optional<std::string> explicit_id;
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) explicit_id = "client-" + std::to_string(step % 3);
    auto match = table.find_or_create(chain, hashes, explicit_id);
    check(match.session != nullptr);
    check(match.how == "header" || match.how == "prefix" || match.how == "window" || match.how == "new");
    std::unique_lock turn(match.session->turn);
    if (match.how == "prefix") {
      std::lock_guard lock(match.session->mu);
      const auto& have = match.session->chain;
      check(match.matched_messages >= 1 && match.matched_messages <= chain.size());
      check(have.size() >= match.matched_messages);
      check(have[match.matched_messages - 1] == chain[match.matched_messages - 1]);
    }
    // The gateway answers: the conversation becomes the request plus a reply.
    Conversation conv;
    for (const auto& m : c) conv.append(m);
    const uint64_t request_messages = conv.length;
    json reply = message(in, "assistant");
    conv.append(reply);
    match.session->conversation = conv;
    {
      std::lock_guard lock(match.session->mu);
      match.session->chain = conv.chain;
      match.session->last_request_messages = request_messages;
    }
    const auto keys = recognition_keys(conv, request_messages);
    table.set_keys(match.session, keys);
    store.sessions[match.session->id] = conv;
    store.request_messages[match.session->id] = request_messages;
    // As SessionStore::save: the session's previous keys are replaced by its current ones.
    std::erase_if(store.keys, [&](const auto& kv) { return kv.second == match.session->id; });
    for (uint64_t k : keys) store.keys[k] = match.session->id;
    turn.unlock();
    c.push_back(reply);
    // The client's next request with the reply: recognised as the same session.
    json next = c;
    next.push_back({{"role", "user"}, {"content", "and then?"}});
    std::vector<uint64_t> next_hashes;
    for (const auto& m : next) next_hashes.push_back(message_hash(m));
    auto again = table.find_or_create(chain_hashes(next), next_hashes, std::nullopt);
    check(again.session != nullptr);
    check(again.how == "prefix" && again.matched_messages == c.size());
    {
      std::lock_guard lock(again.session->mu);
      check(again.session->chain.size() >= c.size() &&
            again.session->chain[c.size() - 1] == chain_hashes(c).back());
    }
    match = {};
    again = {};
    check(table.size() <= max_sessions);
  }
  return 0;
}
