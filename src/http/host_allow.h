// Which Host a request may name: kvgate's defence against DNS rebinding.
//
// A web page of another site may send requests to kvgate but cannot read the answers, unless
// the page's own name comes to resolve to kvgate's address (DNS rebinding): the browser then
// takes kvgate for the page's site and lets the page read everything, while every request it
// sends still names the page's site in its Host header. So kvgate answers only requests whose
// Host is a name it is known by:
//   - localhost, and the listen address when it is a name (--listen myhost.lan:8787);
//   - any IP address literal (127.0.0.1, [::1], 192.168.1.5): a page whose address is an IP
//     literal involves no DNS and cannot be rebound;
//   - the names the operator adds (--allow-host NAME), or any Host at all with "*".
// Each with or without a port (any port: rebinding needs a name, not a port). Names compare
// case-insensitively. A request without a Host header (HTTP/1.0) passes: browsers always send
// one. Behind a reverse proxy that passes the client's Host on, the names clients use must be
// added.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvgate::http {

// The option operators open the list with.
inline constexpr std::string_view kAllowHostOption = "--allow-host";

// Whether a request naming `host_header` (the Host header's value) is answered by a server
// listening on `listen_host` with the operator's `allowed` names ("*": any Host).
bool host_allowed(std::string_view host_header, std::string_view listen_host,
                  const std::vector<std::string>& allowed);

// The message of the 403 a refused Host gets: the Host (printable ASCII only, bounded) and
// the option that allows it.
std::string host_refusal(std::string_view host_header);

}  // namespace kvgate::http
