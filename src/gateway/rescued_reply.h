// A reply rescued from a generation the engine rejected (turn_rescue.cc replays it and parses
// it leniently), and the other answers kvgate writes itself in chat-completions form. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "upstream/reply.h"

namespace kvgate::gateway {

struct Rescue {
  nlohmann::json message;  // the assistant message: content and tool_calls
  std::string finish_reason;
  // The turn's figures (rescued_usage): the engine's, for the attempt that did the work and
  // the replay; unknown (not known) when the engine's counts were not to be had.
  Usage usage;
  size_t calls = 0;
  bool raw = false;  // nothing usable came out: the sanitised text (possibly empty) as content
};

// What the engine did for the attempt whose output its parser refused. That answer, and the
// figures it carried, were lost: the prompt's figures come from the prefill progress the
// engine streamed, or from the growth of its counters (upstream/engine_counters.h) over the attempt;
// the generated tokens from those counters.
struct RefusedAttempt {
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;    // of prompt_tokens, read from the engine's cache
  uint64_t computed_tokens = 0;  // of prompt_tokens, computed
  bool prompt_known = false;
  uint64_t generated_tokens = 0;
  bool generated_known = false;
};

// The replay's own figures (a streamed /completion of the same prompt).
struct ReplayFigures {
  uint64_t computed_tokens = 0;  // of the prompt, computed again for the replay
  uint64_t generated_tokens = 0;
  bool replayed = false;  // false: nothing was replayed
};

// The turn's figures of a rescued answer, one record for the client's usage, the log, the
// metrics and the session: the prompt as the refused attempt found it (its cached part is
// what the cache served this turn), the replay's prefill added to the computed tokens (work,
// not cache), and the completion of the text the client got: the replay's when its text was
// delivered (`replay_delivered`), else the refused attempt's. Not known when the refused
// attempt's prompt figures are not (or, for the completion, its generation when that was
// delivered).
Usage rescued_usage(const RefusedAttempt& refused, const ReplayFigures& replay, bool replay_delivered);

// Whether a stream that delivered `streamed` before the engine refused its end delivers the
// rescued reply's text: its calls, or content that continues (or is) what was streamed.
// Otherwise the client's text is the refused attempt's.
bool rescue_delivered(const Rescue& r, const std::string& streamed);

// The whole chat.completion of a rescued reply, marked {"kvgate": {"rescued": true, …}}; no
// usage when it is not known.
nlohmann::json rescued_response(const Rescue& r, const std::string& model, int64_t created);

// The chunks that end a stream whose end the engine rejected, after `streamed` content went
// out: the rest of the content (when the rescued content continues what was streamed), the
// tool calls, the finish reason, and with `include_usage` the usage (with the cached tokens)
// when known.
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
