// What a request's ids must satisfy before kvgate keeps anything of it.
//
//   - Ids a client sends (the X-Session-Id header, prompt_cache_key, user, Anthropic's
//     metadata.user_id, previous_response_id, an id in the path) end up in sessions, the
//     session store, saved-state records, logs and the status page. One that is not valid
//     UTF-8, holds a control character or is longer than util::kMaxClientIdBytes is refused
//     with a 400 for its sender (util/utf8.h: client_id_problem), so it never reaches them.
//
// Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "gateway/api_error.h"
#include "http/http_message.h"

namespace kvgate::gateway {

// A 400 naming `param` ("X-Session-Id", "prompt_cache_key", ...) when `id` is not one kvgate
// takes from a client.
ApiStatus check_client_id(std::string_view id, std::string_view param);

// The checks of a route's request from its head alone: the X-Session-Id header and the path
// (percent-decoded) as ids.
ApiStatus check_request_head(const http::HttpRequest& head);

}  // namespace kvgate::gateway
