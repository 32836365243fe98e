// TokenEstimate: a prompt's tokens bounded from its size, for servers that cannot count them
// (no /apply-template or /tokenize: vLLM, SGLang and other OpenAI-compatible servers).
//
// A prompt's size in units is the JSON text of its messages (and tools) plus 16 per message
// for the template's markup and 64 for the generation prompt; a text's is its bytes. The
// server's own count of each prompt it answered (usage.prompt_tokens) gives a rate, tokens
// per unit; the estimate is the size times the largest rate of the last 32 answers, plus
// 10 %. Text like what the server has seen counts at most that. Denser text (another
// script, bytes no word covers) can pass it; then the server refuses the prompt as too long,
// and kvgate compacts and retries as it does on any engine. Until the server has answered
// once there is no estimate.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

class TokenEstimate {
 public:
  static constexpr size_t kWindow = 32;    // answers whose rate is remembered
  static constexpr double kMargin = 1.10;  // on top of the largest rate
  static constexpr uint64_t kMessageUnits = 16;
  static constexpr uint64_t kPromptUnits = 64;

  // The size of a chat request `body` whose messages are `messages` (body's own messages are
  // not read).
  static uint64_t units(const nlohmann::json& body, const nlohmann::json& messages);
  static uint64_t text_units(std::string_view text) { return text.size(); }

  // The server counted `engine_tokens` for a prompt of `units`.
  void learn(uint64_t units, uint64_t engine_tokens);
  // The bound for a prompt of `units`; nullopt before the first answer.
  std::optional<uint64_t> estimate(uint64_t units) const;
  // The largest remembered rate (tokens per unit, without the margin); nullopt before the first answer.
  std::optional<double> rate() const;

 private:
  mutable std::mutex mu_;
  std::deque<double> rates_;  // guarded by mu_; the newest last
};

}  // namespace kvgate::gateway
