#include "http/host_allow.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "util/socket.h"
#include "util/strings.h"

namespace kvgate::http {
namespace {

// RFC 9110's port: digits, possibly none ("localhost:" is a valid Host).
bool is_port(std::string_view s) {
  return s.size() <= 5 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_ip_literal(const std::string& host, int family) {
  unsigned char addr[16];
  return ::inet_pton(family, host.c_str(), addr) == 1;
}

// A Host value's host part, without port or brackets; nullopt when the value is not one.
struct HostPart {
  std::string name;
  bool ipv6 = false;
};
std::optional<HostPart> host_part(std::string_view value) {
  if (value.starts_with('[')) {
    const size_t close = value.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view rest = value.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !is_port(rest.substr(1)))) return std::nullopt;
    return HostPart{std::string(value.substr(1, close - 1)), true};
  }
  const size_t colon = value.find(':');
  if (colon != std::string_view::npos && !is_port(value.substr(colon + 1))) return std::nullopt;
  return HostPart{util::ascii_lower(value.substr(0, colon)), false};
}

}  // namespace

bool host_allowed(std::string_view host_header, std::string_view listen_host,
                  const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return true;
  const auto part = host_part(host_header);
  if (!part || part->name.empty()) return false;
  if (part->ipv6) return is_ip_literal(part->name, AF_INET6);
  if (is_ip_literal(part->name, AF_INET) || part->name == "localhost") return true;
  std::string listen = util::ascii_lower(listen_host);
  if (listen.size() >= 2 && listen.front() == '[' && listen.back() == ']')
    listen = listen.substr(1, listen.size() - 2);
  if (part->name == listen) return true;
  return std::any_of(allowed.begin(), allowed.end(),
                     [&](const std::string& name) { return util::ascii_lower(name) == part->name; });
}

std::string host_refusal(std::string_view host_header) {
  std::string shown;
  for (char c : host_header.substr(0, 200)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  return fmt::format(
      "Host '{}' is not a name this gateway answers to (a defence against DNS rebinding): localhost, IP "
      "addresses and the listen address are; start kvgate with {} NAME to add a name clients use (or {} '*' "
      "to accept any Host)",
      shown, kAllowHostOption, kAllowHostOption);
}

}  // namespace kvgate::http
