// A turn's first step, pure: a chat-completions body as it arrived becomes the request the
// turn works on.
//
//   prepare_chat   the per-request bounds (request_limits.h: message count, nesting inside
//                  tool-call arguments, a newest user message that cannot fit), then what the
//                  engine would reject repaired (rescue/history_repair.h: broken tool-call
//                  arguments, null fields, orphan tool results, ...), then validated
//                  (chat_request.h: errors name the field). Repair comes before anything looks
//                  at the history, the same way every turn, so a conversation hashes and
//                  renders identically from turn to turn.
//   stabilise      what keeps the prompt's prefix stable across turns where clients make it
//                  drift: the thinking policy (session/thinking.h), reasoning dropped from the
//                  history, tool results in call order (session/stabiliser.h).
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/api_error.h"
#include "gateway/chat_request.h"
#include "gateway/request_limits.h"
#include "rescue/history_repair.h"
#include "session/stabiliser.h"
#include "session/thinking.h"

namespace kvgate::gateway {

struct PreparedChat {
  ChatRequest request;
  std::vector<rescue::HistoryRepair> repairs;  // what was repaired, in message order
};

// REQUIRES: `body` came from parse_json_body (its nesting is bounded).
ApiResult<PreparedChat> prepare_chat(nlohmann::json body, const RequestLimits& limits);

struct Stabilised {
  bool thinking = false;  // thinking is on for this request
  size_t stripped = 0;    // reasoning fields removed from the history
  size_t reordered = 0;   // tool-result groups put back in call order
};

// REQUIRES: `body` is a validated chat body (prepare_chat).
Stabilised stabilise(nlohmann::json& body, const session::ThinkingOptions& thinking,
                     const session::StabiliserOptions& stabiliser);

}  // namespace kvgate::gateway
