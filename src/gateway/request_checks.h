// What a request's head and ids must satisfy before kvgate keeps anything of it.
//
//   - Ids a client sends (the X-Session-Id header, prompt_cache_key, user, Anthropic's
//     metadata.user_id, previous_response_id, an id in the path) end up in sessions, the
//     session store, saved-state records, logs and the status page. One that is not valid
//     UTF-8, holds a control character or is longer than util::kMaxClientIdBytes is refused
//     with a 400 for its sender (util/utf8.h: client_id_problem), so it never reaches them.
//   - A JSON body must say so: a POST route's Content-Type is application/json or
//     application/*+json (parameters such as charset allowed). A browser page of another site
//     can send a body without asking first only as text/plain, a form or no type at all, so
//     such a request gets 415 instead of running a completion. No Content-Type is accepted
//     from clients that are not browsers (Python's requests.post(data=...) sends none); a
//     browser sends an Origin header with every POST, and with one the type is required.
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include "gateway/api_error.h"
#include "http/http_message.h"

namespace kvgate::gateway {

// A 400 naming `param` ("X-Session-Id", "prompt_cache_key", ...) when `id` is not one kvgate
// takes from a client.
ApiStatus check_client_id(std::string_view id, std::string_view param);

// Whether a Content-Type value (nullopt: no header) says JSON, as above; `from_browser`: the
// request carries an Origin header.
bool json_content_type(std::optional<std::string_view> content_type, bool from_browser);

// The checks of a route's request from its head alone: the X-Session-Id header and the path
// (percent-decoded) as ids, and, when the route reads a JSON body, the content type (415).
ApiStatus check_request_head(const http::HttpRequest& head, bool json_body);

}  // namespace kvgate::gateway
