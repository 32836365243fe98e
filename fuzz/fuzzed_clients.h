// The clients of the recognition fuzz targets (session_recognition_fuzz: the real chat turn;
// session_summary_fuzz: MiniGateway, whose compactions write summaries), driven by the
// fuzzer's bytes: up to 4 clients of two API keys, each with its own message list and, for
// some, an explicit id that other clients and the other key may send too. Before each
// request its client edits a message, drops its oldest turn, moves its clock line on, drops
// the last reply (a retry), forks another client's history, or just goes on; then it adds a
// user message or a tool result (mostly naming the call it answers). Messages come in the
// shapes clients send (text, content parts, tool calls, reasoning) with clock lines, ids,
// multi-byte and invalid UTF-8.
//
// Not thread-safe (one per input).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

namespace kvgate::fuzzing {

struct FuzzedClient {
  std::string key;                                   // "k1" or "k2" (the keys testing::TurnDriver configures)
  std::string scope;                                 // session::scope_of_key(key)
  std::optional<std::string> id;                     // the conversation id it sends, if any
  nlohmann::json history = nlohmann::json::array();  // its messages, its newest request's last
};

class FuzzedClients {
 public:
  explicit FuzzedClients(FuzzedDataProvider& in);

  // The client of the next request, with its history changed and a new message added: its
  // history is the request.
  FuzzedClient& next_request(int step);
  // An assistant message in one of the shapes (the engine's reply, or a client's own
  // version of a turn).
  nlohmann::json assistant_message() { return message("assistant"); }

 private:
  std::string piece();
  nlohmann::json message(const char* role);
  void change_history(FuzzedClient& client, int step);
  // Mostly, a tool result names the call it answers when the history's last message made one
  // (otherwise it is an orphan, which the turn repairs).
  void answer_call(const nlohmann::json& history, nlohmann::json& result);

  FuzzedDataProvider& in_;
  std::vector<FuzzedClient> clients_;
};

}  // namespace kvgate::fuzzing
