// Gateway: the status page (GET /, /kvgate/), its assets, and the prefix-break inspector's
// turn records (GET /kvgate/v1/sessions/ID/turns[/N]; a turn leaves its record in commit,
// turn_commit.cc).
#include <fmt/format.h>

#include "gateway/gateway.h"
#include "gateway/web_assets.h"

namespace kvgate::gateway {

using http::HeaderList;
using session::TurnRecord;

using nlohmann::json;

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether an Accept-Encoding value admits gzip ("gzip", "*", without q=0).
bool accepts_gzip(std::string_view accept) {
  while (!accept.empty()) {
    const size_t comma = accept.find(',');
    std::string_view item = trimmed(accept.substr(0, comma));
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    const size_t semi = item.find(';');
    const std::string_view coding = trimmed(item.substr(0, semi));
    if (coding != "gzip" && coding != "x-gzip" && coding != "*") continue;
    if (semi != std::string_view::npos) {
      const std::string_view param = trimmed(item.substr(semi + 1));
      if (param == "q=0" || param == "q=0.0" || param == "q=0.00" || param == "q=0.000") continue;
    }
    return true;
  }
  return false;
}

// The page runs only its own script (no inline code), fetches only from this origin, and
// sends no referrer (a key given as ?key= never leaves in a Referer header).
const HeaderList kPageHeaders = {
    {"Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' "
     "data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"},
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"X-Frame-Options", "DENY"},
};

std::optional<uint64_t> parse_turn_number(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

std::string_view content_type_of(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

void Gateway::status_asset(const HttpRequest& request, ResponseWriter& writer) {
  const std::string prefix = "/kvgate/assets/";
  const std::string name = request.path.substr(prefix.size());
  // The page itself is served at / and /kvgate/ only, with its headers.
  const WebAsset* asset = name == "status.html" ? nullptr : find_web_asset(name);
  if (asset == nullptr) return send_error(writer, not_found("no such asset"));
  const bool gzip = accepts_gzip(request.header("accept-encoding").value_or(""));
  HeaderList headers = kPageHeaders;
  headers.emplace_back("Content-Type", std::string(content_type_of(asset->name)));
  headers.emplace_back("Cache-Control", name == "chart.min.js" ? "public, max-age=86400" : "no-cache");
  headers.emplace_back("Vary", "Accept-Encoding");
  if (gzip) headers.emplace_back("Content-Encoding", "gzip");
  writer.send(200, headers, std::string(gzip ? asset->gzip : asset->raw));
}

void Gateway::status_page(const HttpRequest& request, ResponseWriter& writer) {
  const WebAsset* page = find_web_asset("status.html");
  const bool gzip = accepts_gzip(request.header("accept-encoding").value_or(""));
  HeaderList headers = kPageHeaders;
  headers.emplace_back("Content-Type", std::string(content_type_of(page->name)));
  headers.emplace_back("Cache-Control", "no-cache");
  headers.emplace_back("Vary", "Accept-Encoding");
  if (gzip) headers.emplace_back("Content-Encoding", "gzip");
  writer.send(200, headers, std::string(gzip ? page->gzip : page->raw));
}

void Gateway::session_turns(Session& s, const std::string& rest, ResponseWriter& writer) {
  // rest: "/turns", "/turns/" or "/turns/N"
  const std::string_view r = rest;
  if (r != "/turns" && !r.starts_with("/turns/")) {
    return send_error(writer, not_found("no such route under this session: use /turns or /turns/N"));
  }
  const std::string_view n_text = r.size() > 7 ? r.substr(7) : std::string_view();
  std::lock_guard lock(s.mu);
  if (n_text.empty()) return send_json(writer, 200, {{"object", "list"}, {"data", s.turns.to_json()}});
  const auto n = parse_turn_number(n_text);
  const TurnRecord* t = n ? s.turns.find(*n) : nullptr;
  if (t == nullptr) {
    return send_error(writer, not_found("no such turn in this session (turns are numbered from 1; the last "
                                        "64 of this process are kept)"));
  }
  send_json(writer, 200, to_json(*t, true));
}

}  // namespace kvgate::gateway
