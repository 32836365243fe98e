#include "gateway/request_checks.h"

#include <limits>
#include <string>

#include <fmt/format.h>

#include "util/strings.h"
#include "util/utf8.h"

namespace kvgate::gateway {

ApiStatus check_client_id(std::string_view id, std::string_view param) {
  auto problem = util::client_id_problem(id);
  if (!problem) return {};
  return bad_request(
      fmt::format("{} {}: an id must be valid UTF-8 without control characters, at most {} bytes", param,
                  *problem, util::kMaxClientIdBytes),
      std::string(param), "invalid_id");
}

bool json_content_type(std::optional<std::string_view> content_type, bool from_browser) {
  const std::string_view value = content_type ? util::trim_blanks(*content_type) : std::string_view();
  if (value.empty()) return !from_browser;
  const std::string type = util::ascii_lower(util::trim_blanks(value.substr(0, value.find(';'))));
  if (type == "application/json") return true;
  return type.starts_with("application/") && type.ends_with("+json") && type.size() > 17;
}

ApiStatus check_request_head(const http::HttpRequest& head, bool json_body) {
  if (auto id = head.header("x-session-id")) KV_TRY(check_client_id(*id, "X-Session-Id"));
  // A path is no id as a whole, but the ids in it (/v1/responses/ID, /kvgate/v1/sessions/ID)
  // are: the same rule, without the id's length bound (the request target has its own).
  if (auto problem = util::client_id_problem(head.path, std::numeric_limits<size_t>::max())) {
    return bad_request(
        fmt::format("the request path (percent-decoded) {}: ids in a path must be valid UTF-8 without "
                    "control characters",
                    *problem),
        "path", "invalid_id");
  }
  if (json_body && !json_content_type(head.header("content-type"), head.header("origin").has_value())) {
    const auto type = head.header("content-type");
    ApiError e = bad_request(
        fmt::format(
            "Content-Type must be application/json for a JSON body, got {}; send the header "
            "'Content-Type: application/json' (curl: -H 'Content-Type: application/json')",
            type ? "'" + std::string(type->substr(0, 100)) + "'" : std::string("none from a browser")),
        "Content-Type", "unsupported_media_type");
    e.status = 415;
    return e;
  }
  return {};
}

}  // namespace kvgate::gateway
