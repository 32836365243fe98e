// Bounds on the work one client request can cause, checked before the work is done.
//
// A request body passes, in order:
//   1. parse_json_body() (chat_request.h): nesting at most `max_depth` containers (checked
//      while parsing, so no deeper value is ever built, copied or dumped), numbers within
//      double's range, strings valid UTF-8 (the parser's own rule). Everything kvgate later
//      does with an accepted body (copies, dumps, hashing, repair) recurses at most
//      `max_depth` levels.
//   2. check_chat_limits() (here), on the parsed chat body, before history repair:
//        - the bounds of work_limits.h (schemas, grammar, tools, logit_bias, stop);
//        - at most `max_messages` messages (each message costs hashing, repair and one or
//          two /tokenize calls; 100,000 messages took minutes);
//        - every tool-call `arguments` string nests at most `max_depth` levels (the
//          string is parsed again for hashing, normalize.cc);
//        - the messages compaction always keeps (the system message and the newest user
//          message with what follows it) can fit the context at all. A token is at most
//          `max_token_bytes` bytes (the longest entry of the model's vocabulary), so text of
//          B bytes is at least B / max_token_bytes tokens: more than the context means no
//          compaction can help, and the request is refused before any tokenising.
//   3. Token counting and compaction then run under deadlines (TokenCounter's time limit,
//      CompactionOptions::time_limit): on expiry the request fails with a clear error.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/api_error.h"

namespace kvgate::gateway {

// The nesting bound of any JSON kvgate parses from a client (containers; the body itself
// counts as one).
inline constexpr size_t kMaxJsonDepth = 512;

struct RequestLimits {
  size_t max_depth = kMaxJsonDepth;
  size_t max_messages = 4096;
  uint64_t context_tokens = 0;   // per-slot context; 0: unknown (the fit check is skipped)
  uint64_t max_token_bytes = 0;  // longest vocabulary entry in bytes; 0: unknown (skipped)
};

// REQUIRES: `body` passed parse_json_body. The 400/413 to answer with when a bound is passed.
ApiStatus check_chat_limits(const nlohmann::json& body, const RequestLimits& limits);

// A 413 for a request whose work passed a time limit (token counting, compaction).
ApiError request_too_large(std::string message);

// A linear scan of JSON text without parsing it (strings skipped, no recursion, no
// allocation beyond one frame per open container): where nesting first passes `max_depth`,
// and the path ("metadata[0][0]", "messages[2].content") at the first of that point or
// byte `stop_at`. Meaningful for valid JSON up to that point; harmless on anything else.
struct JsonTextScan {
  bool exceeded = false;  // nesting passed max_depth (at `offset`)
  size_t offset = 0;      // where the scan stopped
  std::string path;       // of the value at `offset` (sanitised to valid UTF-8)
};
JsonTextScan scan_json_text(std::string_view text, size_t max_depth, size_t stop_at = std::string_view::npos);

// The offset of the first number outside strings that overflows a double (npos if none).
size_t first_overflowing_number(std::string_view text);

// The deepest container nesting of JSON text (strings skipped, without parsing or
// recursion), and the byte offset where it first passes `max_depth` (npos if it does not).
// Linear in the bytes; meaningful for valid JSON, harmless on anything else.
size_t json_text_depth_exceeded_at(std::string_view text, size_t max_depth);

}  // namespace kvgate::gateway
