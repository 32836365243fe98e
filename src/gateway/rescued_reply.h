// A reply rescued from a generation the engine rejected (turn_rescue.cc replays it and parses
// it leniently), and the other answers kvgate writes itself in chat-completions form. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

struct Rescue {
  nlohmann::json message;  // the assistant message: content and tool_calls
  std::string finish_reason;
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;  // of prompt_tokens, served from the engine's cache
  uint64_t completion_tokens = 0;
  size_t calls = 0;
  bool raw = false;  // nothing usable came out: the sanitised text (possibly empty) as content
  bool usage_known = true;  // false: nothing was replayed, the counts above are not the engine's
};

// The whole chat.completion of a rescued reply, marked {"kvgate": {"rescued": true, …}}; no
// usage when it is not known.
nlohmann::json rescued_response(const Rescue& r, const std::string& model, int64_t created);

// The chunks that end a stream whose end the engine rejected, after `streamed` content went
// out: the rest of the content (when the rescued content continues what was streamed), the
// tool calls, the finish reason, and with `include_usage` the usage.
std::vector<nlohmann::json> rescued_chunks(const Rescue& r, const std::string& streamed, const std::string& chunk_id,
                                           const std::string& model, int64_t created, bool include_usage);

// The chunk that ends a reply the context cut short: finish_reason "length".
nlohmann::json length_finish_chunk(const std::string& chunk_id, const std::string& model, int64_t created);

// Whether a complete chat.completion holds a tool call whose arguments are not a JSON object.
bool has_unusable_arguments(const nlohmann::json& response);

// The view with the opt-in repairs a strict template needs (late system messages become user
// messages, empty assistant turns are dropped), against `body`'s tools; deterministic.
nlohmann::json strict_repair(const nlohmann::json& view, const nlohmann::json& body);

}  // namespace kvgate::gateway
