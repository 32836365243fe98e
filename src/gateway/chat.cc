// The chat-completions flow (Gateway::chat): recognise the session, prepare the request
// for a stable, cache-friendly prompt, relay the engine's answer, account for it.
#include <thread>

#include <fmt/format.h>

#include "gateway/chat_request.h"
#include "gateway/gateway.h"
#include "gateway/normalize.h"
#include "gateway/reply.h"
#include "gateway/sse.h"
#include "gateway/stream_relay.h"
#include "util/log.h"

namespace kvgate::gateway {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

const HeaderList kJson = {{"Content-Type", "application/json"}};

// Session id from the X-Session-Id header or the `user` field (sanitised).
std::optional<std::pair<std::string, std::string>> explicit_session(const HttpRequest& request, const ChatRequest& chat) {
  auto clean = [](std::string_view v) -> std::optional<std::string> {
    if (v.empty() || v.size() > 200) return std::nullopt;
    for (char c : v) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '/') return std::nullopt;
    }
    return std::string(v);
  };
  if (auto h = request.header("x-session-id")) {
    if (auto id = clean(*h)) return std::make_pair(*id, std::string("header"));
  }
  if (chat.user) {
    if (auto id = clean(*chat.user)) return std::make_pair("user:" + *id, std::string("user"));
  }
  return std::nullopt;
}

}  // namespace

void Gateway::chat(const HttpRequest& request, ResponseWriter& writer) {
  const auto t0 = Clock::now();
  RequestRecord rec{.route = "chat"};
  ChatRequest req;
  if (auto e = parse_chat_request(request.body, req)) {
    rec.status = e->status;
    rec.error_kind = "bad_request";
    metrics_.record(rec);
    return send_error(writer, *e);
  }
  rec.stream = req.stream;

  // 1. Which conversation is this?
  const auto chain = chain_hashes(req.messages());
  auto explicit_id = explicit_session(request, req);
  auto match = explicit_id ? sessions_.find_or_create(chain, explicit_id->first, explicit_id->second)
                           : sessions_.find_or_create(chain, std::nullopt);
  auto session = match.session;
  std::unique_lock turn(session->turn);  // one request at a time per conversation

  // 2. Prepare the request: thinking policy, stable history, slot, cache, usage.
  json& body = req.body;
  const bool thinking = apply_thinking_policy(body, options_.thinking);
  const size_t stripped = strip_history_reasoning(body["messages"]);
  auto [slot, reassigned] = slots_.acquire(session->id);
  body["id_slot"] = slot;
  body["cache_prompt"] = true;
  if (req.stream) {
    if (!body.contains("stream_options") || !body["stream_options"].is_object()) body["stream_options"] = json::object();
    body["stream_options"]["include_usage"] = true;
    body["return_progress"] = true;
  }

  if (auto e = wait_for_engine(writer)) {
    rec.status = e->status;
    rec.error_kind = "engine_unavailable";
    metrics_.record(rec);
    return send_error(writer, *e);
  }

  // 3. Exact prompt accounting (incremental; the engine's own template and tokenizer).
  uint64_t counted_tokens = 0;
  if (options_.count_tokens) {
    const auto ta = Clock::now();
    auto count = tokens_.count(body);
    rec.accounting_ms = ms_since(ta);
    if (count.ok()) {
      counted_tokens = count->tokens;
    } else {
      util::log_event(util::LogLevel::kWarn, "token_accounting_failed",
                      {{"session", session->id}, {"error", count.error().message()}});
    }
  }

  // 4. Relay.
  CancelScope cancel;
  ReplyAccumulator reply;
  // The session is updated before the client receives the end of the answer (the final
  // body, or the stream's [DONE]): a client that reacts at once sees a consistent state.
  std::optional<std::string> final_body;
  std::unique_ptr<StreamRelay> relay;
  bool saw_done = false;
  double ttft_ms = -1;
  int status = 0;
  std::optional<ApiError> failure;
  bool saw_error_event = false;  // the engine reported an error inside its stream
  const std::string upstream_body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!req.stream) {
    std::atomic<bool> done{false};
    std::thread watcher([&] {
      while (!done.load()) {
        if (writer.client_gone()) {
          cancel.cancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    auto res = upstream_->call("POST", "/v1/chat/completions", upstream_body, upstream_timeout(counted_tokens, true),
                               &cancel);
    done = true;
    watcher.join();
    if (auto* err = std::get_if<UpstreamError>(&res)) {
      failure = from_upstream_error(*err);
    } else {
      auto& r = std::get<UpstreamResponse>(res);
      status = r.status;
      if (r.status != 200) {
        failure = from_engine_answer(r.status, r.body);
      } else {
        auto j = json::parse(r.body, nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
          failure = bad_gateway("the engine answered with a body that is not JSON");
        } else {
          reply.set_response(j);
          ttft_ms = ms_since(t0);
          const bool changed = apply_empty_content_fallback(j, options_.thinking);
          final_body = changed ? j.dump(-1, ' ', false, json::error_handler_t::replace) : std::move(r.body);
        }
      }
    }
    if (failure && !cancel.cancelled()) send_error(writer, *failure);
  } else {
    relay = std::make_unique<StreamRelay>(writer, cancel, options_.stream_head_grace, options_.keepalive);
    SseParser parser;
    std::string error_body;
    auto res = upstream_->stream(
        "/v1/chat/completions", upstream_body,
        {.on_start = [&](int s, const std::string&) {
           status = s;
           // An engine that accepted the request: the client's stream can start now.
           return s != 200 || relay->begin();
         },
         .on_data = [&](std::string_view data) {
           if (status != 200) {
             error_body.append(data);
             return error_body.size() < (1 << 20);
           }
           for (const auto& ev : parser.feed(data)) {
             if (ev.comment_only) continue;  // the engine's pings; kvgate sends its own
             bool forward = true;
             if (ev.is_done()) {
               saw_done = true;
               forward = false;  // sent after the session is updated
             }
             if (!ev.is_done()) {
               auto chunk = json::parse(ev.data, nullptr, false);
               if (!chunk.is_discarded()) {
                 reply.add_chunk(chunk);
                 if (chunk.contains("error")) saw_error_event = true;
                 if (auto p = chunk.find("prompt_progress"); p != chunk.end() && p->is_object()) {
                   relay->set_progress(fmt::format("prefill {}/{} tokens ({} cached)", p->value("processed", 0),
                                                  p->value("total", 0), p->value("cache", 0)));
                   forward = false;  // progress travels as keep-alive comments
                 }
                 const bool usage_only = chunk.contains("usage") && chunk.contains("choices") &&
                                         chunk["choices"].is_array() && chunk["choices"].empty();
                 if (usage_only && !req.include_usage) forward = false;
                 if (ttft_ms < 0 && reply.has_output()) ttft_ms = ms_since(t0);
               }
             }
             if (forward && !relay->write(ev.raw)) return false;
           }
           return true;
         }},
        upstream_timeout(counted_tokens, false), &cancel);
    if (auto* err = std::get_if<UpstreamError>(&res)) {
      failure = from_upstream_error(*err);
    } else if (status != 200) {
      failure = from_engine_answer(status, error_body);
    } else if (!saw_done && !saw_error_event && !cancel.cancelled()) {
      // The engine's stream ended early (crash, broken connection): say so in-stream.
      failure = bad_gateway("the engine's stream ended before completion");
    }
    if (failure && !cancel.cancelled()) {
      if (relay->started()) {
        relay->write("data: " + failure->to_json().dump() + "\n\n");
        relay->finish();
      } else {
        relay->finish();
        send_error(writer, *failure);
      }
    }
  }

  // 5. Account, remember the conversation as the client now sees it.
  const Usage& u = reply.usage();
  rec.status = failure ? failure->status : 200;
  if (failure) rec.error_kind = cancel.cancelled() ? "client_disconnect" : failure->code.value_or("upstream");
  if (!failure && saw_error_event) {
    rec.status = 500;
    rec.error_kind = "engine_stream_error";
  }
  rec.prompt_tokens = u.prompt_tokens;
  rec.cached_tokens = u.cached_tokens;
  rec.prefilled_tokens = u.prefilled_tokens;
  rec.completion_tokens = u.completion_tokens;
  rec.ttft_ms = ttft_ms;
  rec.decode_tokens_per_s = u.predicted_per_second;
  rec.total_ms = ms_since(t0);
  int64_t accounting_diff = 0;
  if (u.known) {
    learn_prefill_speed(u.prompt_per_token_ms, u.prefilled_tokens);
    if (counted_tokens > 0 && u.prompt_tokens > 0) accounting_diff = tokens_.calibrate(counted_tokens, u.prompt_tokens);
  }
  metrics_.record(rec);
  {
    std::lock_guard lock(session->mu);
    auto& c = session->counters;
    ++c.requests;
    if (failure || saw_error_event) ++c.errors;
    c.prompt_tokens += u.prompt_tokens;
    c.cached_tokens += u.cached_tokens;
    c.prefilled_tokens += u.prefilled_tokens;
    c.completion_tokens += u.completion_tokens;
    if (ttft_ms >= 0) c.ttft_ms_total += ttft_ms;
    session->slot = slot;
    if (u.known) {
      session->last_prompt_tokens = u.prompt_tokens;
      session->last_cached_tokens = u.cached_tokens;
    }
  }
  if (!failure && !saw_error_event) {
    std::vector<uint64_t> seen = chain;
    extend_chain(seen, reply.message());
    sessions_.update_chain(session, std::move(seen), chain.size());
  }
  if (final_body) writer.send(200, kJson, *final_body);
  if (relay) {
    if (saw_done) relay->write("data: [DONE]\n\n");
    relay->finish();
  }
  util::log_event(failure || saw_error_event ? util::LogLevel::kWarn : util::LogLevel::kInfo, "request",
                  {{"route", "chat"},
                   {"session", session->id},
                   {"recognised_by", match.how},
                   {"matched_messages", match.matched_messages},
                   {"messages", chain.size()},
                   {"slot", slot},
                   {"slot_reassigned", reassigned},
                   {"stream", req.stream},
                   {"thinking", thinking},
                   {"reasoning_stripped", stripped},
                   {"status", rec.status},
                   {"error", failure ? json(failure->message)
                                     : saw_error_event && reply.error() ? *reply.error() : json(nullptr)},
                   {"prompt_tokens", u.prompt_tokens},
                   {"counted_tokens", counted_tokens},
                   {"accounting_diff", accounting_diff},
                   {"accounting_ms", rec.accounting_ms},
                   {"cached_tokens", u.cached_tokens},
                   {"prefilled_tokens", u.prefilled_tokens},
                   {"completion_tokens", u.completion_tokens},
                   {"ttft_ms", ttft_ms},
                   {"total_ms", rec.total_ms}});
}

}  // namespace kvgate::gateway
