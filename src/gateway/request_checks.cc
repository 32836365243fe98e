#include "gateway/request_checks.h"

#include <limits>
#include <string>

#include <fmt/format.h>

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

ApiStatus check_request_head(const http::HttpRequest& head) {
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
  return {};
}

}  // namespace kvgate::gateway
