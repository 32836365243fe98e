// Test support for the wire library's tests: JSON pointers for
// mutation tests, the SSE events the encoders write, read back, and checks of both event
// grammars that rebuild what a client would accumulate.
#pragma once

#include <functional>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "wire/chat_reply.h"
#include "wire/wire_error.h"

namespace kvgate::wire::testing {

// Every JSON pointer into `value`, containers included (not the root).
std::vector<std::string> all_pointers(const ClientJson& value, const std::string& prefix = "");

// Calls `convert` with `valid` changed at one place, for every place and each of a set of
// values of every JSON type (null, booleans, numbers, strings, arrays, objects). Returns how
// many variants were tried.
size_t for_each_mutation(const ClientJson& valid, const std::function<void(const ClientJson&)>& convert);

// Everything `stream` (MessagesStream or ResponsesStream) writes for `chunks`: start, each
// chunk, finish.
template <typename Stream>
std::vector<std::string> encode(Stream& stream, const std::vector<nlohmann::json>& chunks) {
  std::vector<std::string> out;
  if constexpr (std::is_same_v<decltype(stream.start()), std::string>) {
    out.push_back(stream.start());
  } else {
    out = stream.start();
  }
  for (const nlohmann::json& c : chunks) {
    for (std::string& e : stream.on_chunk(c)) out.push_back(std::move(e));
  }
  for (std::string& e : stream.finish()) out.push_back(std::move(e));
  return out;
}

struct Event {
  std::string name;
  ClientJson data;
};
std::vector<std::string> event_names(const std::vector<Event>& events);
// Splits "event: NAME\ndata: JSON\n\n" strings; a string that is not exactly one such event
// is a test failure (reported through gtest) and skipped.
std::vector<Event> parse_events(const std::vector<std::string>& sse);

// Checks the Anthropic event grammar (message_start first; blocks started in index order,
// deltas of the block's own type only while it is open, each stopped once; one
// message_delta after the last stop; message_stop last; pings anywhere) and rebuilds the
// final message as a client accumulates it (tool_use input parsed from the concatenated
// partial_json; when that is not JSON, which only a reply cut at max_tokens may leave, the
// text itself). Violations are gtest failures.
ClientJson accumulate_anthropic(const std::vector<Event>& events);

// Checks the Responses event grammar (sequence numbers 0, 1, 2, …; created and in_progress
// first; items added in output order, deltas only for the open item, the done events'
// text equal to the concatenated deltas; completed/incomplete/failed last, its output equal
// to the done items) and returns the terminal event's response. Violations are gtest
// failures.
ClientJson accumulate_responses(const std::vector<Event>& events);

// `blocks` with its tool calls (Anthropic tool_use blocks, Responses function_call items)
// sorted by call id, without the ids and statuses of function_call items (they follow the
// output position): when calls interleave, the stream presents them in the order their first
// pieces arrive.
ClientJson calls_in_id_order(ClientJson blocks);

// The fixtures recorded from the pinned engine (tests/fixtures/wire/*.json, README there),
// by scenario name.
std::map<std::string, nlohmann::json> recorded_fixtures();

// A request the agent CLIs sent (tests/fixtures/agents/CLI/NAME.json, README there): its body
// as the chat-completions messages kvgate's chat pipeline runs — Claude Code's
// /v1/messages and Codex's /v1/responses bodies converted as the gateway converts them,
// Qwen Code's /v1/chat/completions messages as sent. CLI: claude, codex or qwen. Failures
// (a missing file, a conversion error) are gtest failures and give an empty array.
nlohmann::json agent_request_messages(const std::string& cli, const std::string& name);
// The whole chat-completions body of such a request (an empty object on failure).
nlohmann::json agent_request_chat(const std::string& cli, const std::string& name);

// A reply to stream in random pieces: what the generated chunks carry.
struct ReplySpec {
  std::string id = "chatcmpl-spec";
  std::string reasoning;
  std::string text;
  std::vector<ToolCall> calls;
  std::string finish = "stop";
  ChatUsage usage{.prompt_tokens = 120, .cached_tokens = 100, .completion_tokens = 17, .reasoning_tokens = 0};
};

struct ChunkOptions {
  bool interleave_calls = false;  // tool-call pieces of different calls alternate
  bool usage_in_finish = false;   // usage rides on the finish chunk (else its own chunk)
  bool omit_finish = false;       // no chunk carries a finish reason
  bool omit_usage = false;        // no chunk carries usage
  bool noise = false;             // empty deltas, role-only deltas and unknown fields
};

// The non-streamed chat.completion of `spec`, in llama-server's shape.
nlohmann::json chat_response(const ReplySpec& spec);
// The chat.completion.chunk objects of `spec`: every text cut at random places (pieces may be
// empty), a call's id and name in its first piece, reasoning before text before calls.
std::vector<nlohmann::json> chunks_for(const ReplySpec& spec, std::mt19937& rng, const ChunkOptions& options);
// A random reply: any of reasoning, text and up to three calls with JSON-object arguments,
// multi-byte text included.
ReplySpec random_reply(std::mt19937& rng);

}  // namespace kvgate::wire::testing
