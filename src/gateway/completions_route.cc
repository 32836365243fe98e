// Gateway: POST /v1/completions, a raw text completion. Checked as chat bodies are (JSON,
// answer size, grammar and schema work, a body that once stopped the engine), admitted, sent
// to a slot that holds only the caller's key's content, and relayed whole or as a stream,
// with the model named by its id. A request the engine failed before any of its answer reached
// the client is sent once more to the restarted engine by the chat turn's own EngineResend
// (engine_link.h), and an output the engine's parser refused is answered (completion_rescue.cc).
#include <fmt/format.h>

#include "gateway/chat_request.h"
#include "gateway/disconnect_watch.h"
#include "gateway/gateway.h"
#include "gateway/json_headers.h"
#include "gateway/stream_relay.h"
#include "gateway/turn_accounting.h"
#include "gateway/work_limits.h"
#include "http/sse.h"
#include "upstream/engine_errors.h"
#include "upstream/model_id.h"
#include "upstream/rescue_replay.h"
#include "util/json.h"
#include "util/time.h"

namespace kvgate::gateway {

using http::SseParser;
using nlohmann::json;

void Gateway::completions(const HttpRequest& request, ResponseWriter& writer) {
  const auto t0 = std::chrono::steady_clock::now();
  auto parsed = parse_json_body(request.body);
  if (!parsed.ok()) return send_error(writer, parsed.error());
  const json& body = *parsed;
  if (auto valid = validate_completion_body(body); !valid.ok()) return send_error(writer, valid.error());
  if (auto bounded = check_work_limits(body); !bounded.ok()) return send_error(writer, bounded.error());
  RawCompletion c{
      .digest = FatalRequests::digest(request.body),
      .rec = {.route = "completions", .stream = body.contains("stream") && body["stream"] == true},
      // The engine names the model by its file's path: the client gets the id it knows.
      .model = answer_model_for(body, options_.model_name),
      .client_gone = [&writer] { return writer.client_gone(); }};
  if (engine_.fatal().fatal(c.digest)) return send_error(writer, fatal_request_error(true));
  auto ticket = admit(fmt::format("completion:{}", ++request_serial_), c.client_gone, c.rec);
  if (!ticket.ok()) {
    metrics_.record(c.rec);
    if (!client_left(ticket.error())) send_error(writer, ticket.error());
    return;
  }
  if (auto ready = engine_.wait_for_engine(c.client_gone); !ready.ok())
    return send_error(writer, ready.error());
  // The engine puts a raw completion in a slot of its choosing: what any slot holds is then
  // unknown (saved first, so no conversation loses more than its cache).
  if (kv_) kv_->before_foreign_use(engine_.generation());
  const FatalRequests::InFlight in_flight = engine_.fatal().enter(c.digest);
  c.resend.emplace(engine_, c.digest);
  c.sent = body;
  if (!c.sent.contains("seed") || !c.sent["seed"].is_number_integer()) c.sent["seed"] = replay_seed();
  if (tenants_.isolating()) {
    // With several keys the slot is kvgate's choice (a client's id_slot too could name a slot
    // another key used): one per key, the least recently used, holding only this key's content.
    const std::string scope = caller_scope(request).value_or("");
    const int slot = slots_.acquire("completion\x1f" + scope).first;
    c.sent["id_slot"] = slot;
    if (!keep_slot_private(slot, scope, false)) c.sent["cache_prompt"] = false;
  }
  if (c.rec.stream) {
    completion_stream(c, writer);
  } else {
    completion_whole(c, writer);
  }
  c.rec.total_ms = util::ms_since(t0);
  metrics_.record(c.rec);
}

bool Gateway::send_again(RawCompletion& c, const UpstreamError& error, const CancelScope& cancel) {
  // One that took the engine down is answered as such below.
  return c.resend->again(error.kind, cancel, c.client_gone) == EngineResend::Verdict::kAgain;
}

void Gateway::completion_whole(RawCompletion& c, ResponseWriter& writer) {
  CancelScope cancel;
  const std::string text = util::json_text(c.sent);
  UpstreamResult<UpstreamResponse> res = UpstreamError{};
  for (;;) {
    c.resend->before();
    std::optional<DisconnectWatch> watch(std::in_place, c.client_gone, cancel);
    res = upstream_->call("POST", "/v1/completions", text, engine_.upstream_timeout(0, true), &cancel);
    watch.reset();
    if (res.ok() || !send_again(c, res.error(), cancel)) break;
  }
  if (!res.ok()) {
    auto e = engine_.fatal().fatal(c.digest) ? fatal_request_error(false)
                                             : engine_.from_upstream_error(res.error());
    c.rec.status = e.status;
    c.rec.error_kind = e.code.value_or("upstream");
    if (res.error().kind != UpstreamFailure::kCancelled) send_error(writer, e);
    return;
  }
  const UpstreamResponse& r = *res;
  c.rec.status = r.status;
  if (r.status == 200) {
    engine_.answered();
    json answer = json::parse(r.body, nullptr, false);
    record_usage(c.rec, usage_from(answer));
    if (rename_model(answer, c.model)) {
      send_json(writer, 200, answer);
    } else {
      writer.send(200, kJsonHeaders, r.body);
    }
  } else if (auto rescued = is_output_parse_error(r.status, r.body)
                                ? rescue_completion(c.sent, c.model, r.body, cancel)
                                : std::nullopt) {
    engine_.answered();
    c.rec.status = 200;
    record_usage(c.rec, usage_from(*rescued));
    send_json(writer, 200, *rescued);
  } else {
    send_error(writer, engine_.from_engine_answer(r.status, r.body));
  }
}

void Gateway::completion_stream(RawCompletion& c, ResponseWriter& writer) {
  CancelScope cancel;
  StreamRelay relay(writer, cancel,
                    {.head_grace = options_.stream_head_grace, .keepalive = options_.keepalive});
  // An error before the stream started is the answer; after, an error event in it.
  auto fail = [&](const ApiError& e) {
    if (relay.started()) {
      relay.write("data: " + util::json_text(e.to_json()) + "\n\n");
    } else {
      relay.finish();
      send_error(writer, e);
    }
  };
  SseParser parser;
  std::string error_body;
  int status = 0;
  bool ended = false;  // by kvgate, for an output the engine refused
  const auto relay_events = [&](std::string_view data) {
    if (status != 200) {
      error_body.append(data);
      return error_body.size() < (1 << 20);
    }
    for (const auto& ev : parser.feed(data)) {
      if (ended) break;
      if (!ev.comment_only) {
        auto chunk = json::parse(ev.data, nullptr, false);
        if (const Usage u = usage_from(chunk); u.known) record_usage(c.rec, u);
        if (auto end = raw_completion_stream_end(chunk, ev.data, c.model)) {
          ended = true;
          if (!relay.write(*end)) return false;
          continue;
        }
        if (rename_model(chunk, c.model)) {
          if (!relay.write("data: " + util::json_text(chunk) + "\n\n")) return false;
          continue;
        }
      }
      if (!relay.write(ev.raw)) return false;
    }
    return true;
  };
  const auto on_start = [&](int s, const std::string&) {
    status = s;
    return true;
  };
  const std::string text = util::json_text(c.sent);
  UpstreamResult<int> res = UpstreamError{};
  for (;;) {
    c.resend->before();
    res = upstream_->stream("/v1/completions", text, {.on_start = on_start, .on_data = relay_events},
                            engine_.upstream_timeout(0, false), &cancel);
    // Again only when nothing of the engine's answer was relayed (its head not even read).
    if (res.ok() || status != 0 || !send_again(c, res.error(), cancel)) break;
  }
  c.rec.status = status;
  if (status == 200 && res.ok()) engine_.answered();
  if (!res.ok()) {
    auto e = status == 0 && engine_.fatal().fatal(c.digest) ? fatal_request_error(false)
                                                            : engine_.from_upstream_error(res.error());
    c.rec.status = e.status;
    c.rec.error_kind = e.code.value_or("upstream");
    if (res.error().kind != UpstreamFailure::kCancelled) fail(e);
  } else if (status != 200) {
    fail(engine_.from_engine_answer(status, error_body));
  }
  relay.finish();
}

}  // namespace kvgate::gateway
