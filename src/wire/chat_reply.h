// What the wire formats read from the chat side: a chat.completion (non-streamed answer) and
// the chat.completion.chunk objects of a streamed one, as llama-server writes them (and
// kvgate relays them).
//
// Token figures: mainline llama-server reports usage.prompt_tokens / completion_tokens and
// the tokens it took from its cache in timings.cache_n; ik_llama.cpp reports them in
// usage.prompt_tokens_details.cached_tokens. prompt_tokens always counts the whole prompt,
// cached tokens included. Reasoning tokens are not counted by either engine; they are 0
// unless usage.completion_tokens_details.reasoning_tokens says otherwise.
//
// Which stop string ended a reply: llama-server reports it only in the `__verbose` object it
// adds when the request asks for it ("verbose": true): stop_type "word" and stopping_word
// (the object also holds the whole rendered prompt, so the adapters ask only when the client
// gave stop sequences). ik_llama.cpp does not report it.
//
// Anything unexpected (missing fields, wrong types, unknown fields) reads as absent: these
// bodies come from the engine, and an odd one must not abort a reply the client waits for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::wire {

struct ChatUsage {
  int64_t prompt_tokens = 0;  // the whole prompt, cached tokens included
  int64_t cached_tokens = 0;  // of those, read from the engine's cache
  int64_t completion_tokens = 0;
  int64_t reasoning_tokens = 0;
};

// nullopt when the body carries no usage object. Timings alone are not usage: llama-server
// also puts them on a chunk in the middle of a stream (with the figures so far).
std::optional<ChatUsage> read_usage(const nlohmann::json& body);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text as the engine wrote it
};

struct ChatReply {
  std::string id;  // the chat completion's id ("chatcmpl-…")
  std::string reasoning;
  std::string text;
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;  // "stop", "length", "tool_calls", ... ("" when absent)
  std::string stop_word;      // the stop string that ended the reply, if the engine said
  std::optional<ChatUsage> usage;
};

// The first choice of a chat.completion. Tool calls without an id get fallback_call_id().
ChatReply read_reply(const nlohmann::json& chat_response);

// One piece of one tool call in a chunk: `id` and `name` usually only in the first piece.
struct ToolCallPiece {
  size_t index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ChunkPieces {
  std::string id;
  std::string reasoning;
  std::string text;
  std::vector<ToolCallPiece> tool_calls;
  std::optional<std::string> finish_reason;
  std::string stop_word;
  std::optional<ChatUsage> usage;
};

// The first choice's delta of a chat.completion.chunk, its finish reason and usage.
ChunkPieces read_chunk(const nlohmann::json& chunk);

// The stop string a chat.completion or chunk says ended the reply ("" when it does not).
std::string stop_word_of(const nlohmann::json& body);

// Largest tool-call index read from the engine; pieces with a larger one are dropped (a
// reply with more calls than this is not an answer a client can run).
inline constexpr size_t kMaxToolCalls = 256;

// An id for a tool call the engine gave none: derived from the reply's id and the call's
// index, so the streamed and the non-streamed conversion of one reply agree.
std::string fallback_call_id(std::string_view reply_id, size_t index);

// The reply id without the engine's "chatcmpl-" prefix: the stem the adapters' ids share.
std::string id_stem(std::string_view chat_id);

}  // namespace kvgate::wire
