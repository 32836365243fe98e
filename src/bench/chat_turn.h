// One chat-completions request of a benchmark client, sent as the client sends it (streamed
// or not, as the body says) and read as the client reads it: the HTTP status, the failure
// class (failure.h), the client-side times, the usage the answer reports and the assistant
// message it carries — for a non-streamed answer choices[0].message exactly as sent, for a
// streamed one the message rebuilt from the chunks (upstream/reply.h), which is what an SDK
// hands an agent.
//
// Thread-safety: as the HttpClient (one thread per client).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/failure.h"
#include "bench/http_client.h"
#include "upstream/reply.h"

namespace kvgate::bench {

inline constexpr std::string_view kChatPath = "/v1/chat/completions";

struct ChatAnswer {
  int status = 0;
  FailureKind failure = FailureKind::kNone;
  std::string error;
  size_t request_bytes = 0;
  double total_ms = 0;
  double ttft_ms = -1;  // streamed: first generated token; non-streamed: the whole answer; -1: none
  gateway::Usage usage;                // of an answered request
  uint64_t overflow_prompt_tokens = 0;  // a context overflow: the prompt the engine counted
  std::optional<nlohmann::json> reply;  // the assistant message of an answered request
  bool ok() const { return failure == FailureKind::kNone; }
};

// Streams when body["stream"] is true.
ChatAnswer post_chat(HttpClient& client, const nlohmann::json& body);

// A complete (non-streamed) answer read as post_chat reads it: `status` 0 with
// `transport_error` when there was none.
ChatAnswer read_chat_answer(int status, const std::string& body, const std::string& transport_error, double ms);

}  // namespace kvgate::bench
