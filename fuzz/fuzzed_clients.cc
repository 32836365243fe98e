#include "fuzzed_clients.h"

#include "session/session.h"

namespace kvgate::fuzzing {

using nlohmann::json;

FuzzedClients::FuzzedClients(FuzzedDataProvider& in) : in_(in), clients_(4) {
  for (auto& c : clients_) {
    c.key = in_.ConsumeIntegralInRange<int>(0, 1) == 0 ? "k1" : "k2";
    c.scope = session::scope_of_key(c.key);
    if (in_.ConsumeIntegralInRange<int>(0, 3) == 0)
      c.id = "client-" + std::to_string(in_.ConsumeIntegralInRange<int>(0, 1));
    c.history.push_back({{"role", "system"}, {"content", "You help. " + piece()}});
  }
}

FuzzedClient& FuzzedClients::next_request(int step) {
  FuzzedClient& c = clients_[in_.ConsumeIntegralInRange<size_t>(0, clients_.size() - 1)];
  change_history(c, step);
  if (in_.ConsumeBool()) {
    c.history.push_back(message("user"));
  } else {
    json result = message("tool");
    answer_call(c.history, result);
    c.history.push_back(std::move(result));
  }
  return c;
}

void FuzzedClients::answer_call(const json& history, json& result) {
  const json& last = history.back();
  const auto calls = last.find("tool_calls");
  if (calls == last.end() || !calls->is_array() || calls->empty() || !calls->front().is_object()) return;
  const auto id = calls->front().find("id");
  if (id != calls->front().end() && id->is_string() && in_.ConsumeIntegralInRange<int>(0, 3) != 0) {
    result["tool_call_id"] = *id;
  }
}

void FuzzedClients::change_history(FuzzedClient& client, int step) {
  json& h = client.history;
  switch (in_.ConsumeIntegralInRange<int>(0, 6)) {
    case 0:  // the client edits a message
      if (h.size() > 1) h[in_.ConsumeIntegralInRange<size_t>(1, h.size() - 1)]["content"] = piece();
      break;
    case 1:  // the client drops its oldest turn (keeps the system message)
      if (h.size() > 3) h.erase(1);
      break;
    case 2:  // the system message's clock line moves on
      h[0]["content"] = "You help. Current time: 2026-11-29 10:0" + std::to_string(step % 10) + ":00";
      break;
    case 3:  // a retry: the last assistant reply is dropped
      if (h.size() > 2 && h.back().value("role", "") == "assistant") h.erase(h.size() - 1);
      break;
    case 4:  // another client's history, forked
      h = clients_[in_.ConsumeIntegralInRange<size_t>(0, clients_.size() - 1)].history;
      break;
    default:
      break;
  }
}

std::string FuzzedClients::piece() {
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
  const int n = in_.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < n; ++i) {
    if (in_.ConsumeBool()) {
      s += kParts[in_.ConsumeIntegralInRange<size_t>(0, std::size(kParts) - 1)];
    } else {
      s += in_.ConsumeRandomLengthString(24);
    }
  }
  return s;
}

json FuzzedClients::message(const char* role) {
  json m = {{"role", role}};
  switch (in_.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      m["content"] = nullptr;
      m["tool_calls"] = json::array({{{"id", piece()},
                                      {"type", "function"},
                                      {"function", {{"name", piece()}, {"arguments", piece()}}}}});
      break;
    case 1:
      m["content"] =
          json::array({{{"type", "text"}, {"text", piece()}}, {{"type", "text"}, {"text", piece()}}});
      break;
    case 2:
      m["content"] = piece();
      m["reasoning_content"] = piece();
      break;
    default:
      m["content"] = piece();
  }
  return m;
}

}  // namespace kvgate::fuzzing
