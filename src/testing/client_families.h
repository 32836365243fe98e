// Families of colliding clients for the isolation property tests: a few clients of two API
// keys sharing system prompts, messages and ids, each request made by one of them doing what
// real clients do (a clock moving on, a sliding window, an edited earlier message, a new run
// of the same agent, a fork of another client's history, a retry, a self-summary). Every
// request goes through `send` (the gateway under test) and the view it sent upstream is
// checked by IsolationOracle.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::testing {

// What the gateway under test sent upstream for one request.
struct SentView {
  nlohmann::json view;  // the upstream messages
  std::string how;      // how the request was recognised, where the gateway says ("" if not)
  std::string detail;   // more, for a failure's message
};

// One request: the API key, the client's id, the messages, and the reply the engine gives.
using SendFn = std::function<SentView(const std::string& key, const std::optional<std::string>& id,
                                      const nlohmann::json& messages, const nlohmann::json& reply)>;

class ClientFamilies {
 public:
  explicit ClientFamilies(uint32_t seed) : rng_(seed) {}
  size_t continuations = 0;  // requests recognised as a self-summary's continuation

  // One generated case of `steps` requests; "" when every view kept the invariant, else the
  // first failure.
  std::string run(int steps, const SendFn& send);
  // Whether this case should use a small gateway (3 sessions): the caller sizes it.
  bool small_table() { return pick(3) == 0; }

 private:
  struct Client {
    std::string key;
    std::optional<std::string> id;
    nlohmann::json history;  // what the client sends next (before its new message)
    std::string last_reply;  // the text of the last reply it was given
  };

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  std::string word();
  nlohmann::json system_message(int day);
  std::string summary_text(int step);
  nlohmann::json user_message();
  void act(Client& c, std::vector<Client>& all, int step);

  std::mt19937 rng_;
};

}  // namespace kvgate::testing
