// Agent traces for kvgate bench replay (format: tests/fixtures/traces/README.md): JSONL, plain
// or zstd-compressed, whose first line may be {"_meta": {...}}, then one complete OpenAI
// chat-completions request body per line, as the agent sent it on that turn (the whole
// history every time).
//
// live_history() builds the messages of a turn in --live mode: the history the client sent
// last turn, then what the trace adds this turn, with the trace's assistant reply to the
// previous turn replaced by the reply the model actually gave: its text and reasoning.
// Tools are not executed, so tool calls always come from the trace's assistant message
// (the trace's tool results that follow answer them); the model's own calls are dropped.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace kvgate::bench {

struct Trace {
  std::string name;     // _meta.name, else the file's stem
  nlohmann::json meta;  // the _meta object (or null)
  std::vector<nlohmann::json> turns;
};

// Reads at most `max_turns` turns (0: all). Errors name the line: not JSON, not an object,
// no non-empty `messages` array.
Result<Trace> load_trace(const std::filesystem::path& path, size_t max_turns = 0);

struct LiveHistory {
  nlohmann::json messages;
  bool live = false;  // false: the trace's messages were used as they are (see reason)
  std::string reason;
};

// previous_trace / previous_sent: the messages of the previous turn in the trace and as
// sent; current_trace: this turn's messages in the trace; reply: the model's answer to the
// previous turn (nullopt if it failed). The system message is always this turn's (agents
// rewrite it, e.g. a clock line). When the trace's history is not an extension of the
// previous turn's (from message 1 on), the trace's messages are used unchanged.
LiveHistory live_history(const nlohmann::json& previous_trace, const nlohmann::json& previous_sent,
                         const nlohmann::json& current_trace, const std::optional<nlohmann::json>& reply);

}  // namespace kvgate::bench
