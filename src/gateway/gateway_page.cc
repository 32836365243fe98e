// Gateway: the status page (GET /, /kvgate/), its assets, and the prefix-break inspector's
// turn records (GET /kvgate/v1/sessions/ID/turns[/N]).
#include <fmt/format.h>

#include "gateway/gateway.h"
#include "gateway/web_assets.h"

namespace kvgate::gateway {

using http::HeaderList;
using session::PrefixBreak;
using session::TurnRecord;
using session::cause_name;
using session::locate_break;
using session::recomputed_tokens;

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

void Gateway::record_turn(Session& session, const TurnFacts& f) {
  const RequestRecord& rec = f.record;
  TurnRecord t;
  t.ts_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  t.status = rec.status;
  t.messages = f.messages;
  t.view_messages = f.view.size();
  t.slot = f.slot;
  t.recognised_by = f.recognised_by;
  t.prompt_tokens = rec.prompt_tokens;
  t.cached_tokens = rec.cached_tokens;
  t.prefilled_tokens = rec.prefilled_tokens;
  t.completion_tokens = rec.completion_tokens;
  if (rec.ttft_ms >= 0) t.ttft_ms = rec.ttft_ms;
  t.total_ms = rec.total_ms;
  for (const auto& ev : f.compactions) {
    t.compactions.push_back({{"level", ev.value("level", "")},
                             {"trigger", ev.value("trigger", "")},
                             {"tokens_before", ev.value("tokens_before", uint64_t{0})},
                             {"tokens_after", ev.value("tokens_after", uint64_t{0})}});
  }
  const bool has_previous = !session.last_view.empty();
  if (has_previous && (f.cause || f.diverged_at < session.last_view.size())) {
    PrefixBreak b = locate_break(session.last_view, f.view, session.last_prompt, f.rendered);
    b.cause = f.cause ? cause_name(*f.cause) : "unexplained";
    b.detail = f.cause_detail;
    t.prefix_break = std::move(b);
  }
  std::lock_guard lock(session.mu);
  if (has_previous && rec.prompt_tokens > 0) {
    // The previous turn's reply is in the engine's cache only when that turn succeeded.
    const TurnRecord* prev = session.turns.last();
    const uint64_t reply = prev && prev->status == 200 ? prev->completion_tokens : 0;
    t.recomputed_tokens = recomputed_tokens(session.last_sent_tokens, reply, t.prompt_tokens, t.cached_tokens);
  }
  session.turns.add(std::move(t));
}

}  // namespace kvgate::gateway
