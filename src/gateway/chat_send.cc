// One attempt at sending a chat request to the engine and relaying its answer
// (Gateway::send_chat). An engine refusal because the prompt is larger than its context is
// reported as `overflow` and nothing is sent to the client, so the caller can compact and
// retry transparently. A generation the engine's own output parser rejects is rescued
// (chat_rescue.cc) and answered as a normal completion, streamed or not.
#include <thread>

#include <fmt/format.h>

#include "gateway/disconnect_watch.h"
#include "gateway/engine_errors.h"
#include "gateway/finish_reason.h"
#include "gateway/gateway.h"
#include "gateway/rescue_replay.h"
#include "http/sse.h"
#include "util/json.h"

namespace kvgate::gateway {

using http::SseParser;
using session::apply_empty_content_fallback;

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The longest line accepted in an engine's event stream (a chunk is a few hundred bytes;
// anything this long is not SSE).
constexpr size_t kMaxEngineEventLine = 8 << 20;

std::string sse(const json& chunk) { return "data: " + util::json_text(chunk) + "\n\n"; }

}  // namespace

Gateway::SendOutcome Gateway::send_chat(const json& body, bool stream, bool include_usage, uint64_t prompt_tokens,
                                        size_t first_call_id, ResponseWriter& writer, StreamRelay* relay,
                                        CancelScope& cancel, Clock::time_point t0) {
  SendOutcome out;
  // The outcome's flags from an engine's error answer (engine_errors.h).
  auto note_engine_error = [&out](int status, const std::string& error) {
    EngineErrorInfo e = classify_engine_error(status, error);
    out.overflow = e.kind == EngineErrorKind::kPromptTooLong;
    out.template_error = e.kind == EngineErrorKind::kTemplate;
    out.context_filled = e.kind == EngineErrorKind::kContextFilled;
    if (out.overflow) {
      out.overflow_prompt_tokens = e.prompt_tokens;
      out.overflow_context = e.n_ctx;
    }
    return e;
  };
  const std::string upstream_body = util::json_text(body);
  const std::string model = body.value("model", options_.model_name);
  if (!stream) {
    std::optional<DisconnectWatch> watch(std::in_place, writer, cancel);
    auto res = upstream_->call("POST", "/v1/chat/completions", upstream_body, upstream_timeout(prompt_tokens, true),
                               &cancel);
    std::optional<std::string> rescue_reason;
    if (auto* err = std::get_if<UpstreamError>(&res)) {
      out.failure = from_upstream_error(*err);
      out.upstream_failure = err->kind;
    } else {
      auto& r = std::get<UpstreamResponse>(res);
      out.status = r.status;
      if (r.status != 200) {
        const EngineErrorInfo e = note_engine_error(r.status, r.body);
        out.failure = from_engine_answer(r.status, r.body);
        if (e.kind == EngineErrorKind::kOutput) rescue_reason = e.message;
      } else {
        auto j = json::parse(r.body, nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
          out.failure = bad_gateway("the engine answered with a body that is not JSON");
          if (options_.on_engine_failure) options_.on_engine_failure("the engine answered 200 with a body that is not JSON");
        } else if (has_unusable_arguments(j)) {
          rescue_reason = "the engine returned tool-call arguments that are not a JSON object";
          out.reply.set_response(j);
          out.final_body = r.body;  // kept if the rescue fails
        } else {
          FinishReasonFix finish(plan::says_stop_at_max_tokens(options_.engine_fork), body);
          finish.fix_response(j);
          out.reply.set_response(j);
          out.ttft_ms = ms_since(t0);
          const bool changed = apply_empty_content_fallback(j, options_.thinking) || finish.rewrote();
          out.final_body = changed ? util::json_text(j) : std::move(r.body);
        }
      }
    }
    if (rescue_reason && !cancel.cancelled()) {
      auto rescued = rescue_generation(body, first_call_id, cancel, *rescue_reason);
      if (rescued.ok()) {
        json resp = rescued_response(*rescued, model);
        out.reply = ReplyAccumulator();
        out.reply.set_response(resp);
        out.final_body = util::json_text(resp);
        out.failure.reset();
        out.status = 200;
        out.rescued = true;
        out.ttft_ms = ms_since(t0);
      } else {
        metrics_.add("rescues_total{outcome=\"failed\"}");
        if (out.failure) out.failure->message += " (rescue failed: " + rescued.error().message() + ")";
      }
    }
    watch.reset();
    return out;
  }

  // Streaming. With tools declared, everything from the first tool-call delta on is held
  // back until the end: if the engine then rejects its output, the rescued calls replace it
  // and the client never sees a half-parsed call.
  const bool hold_calls = body.contains("tools") && body["tools"].is_array() && !body["tools"].empty();
  std::vector<std::string> held;
  bool holding = false;
  std::optional<std::string> parse_error;
  std::string chunk_id = "chatcmpl-kvgate";
  SseParser parser(kMaxEngineEventLine);
  size_t bad_events = 0;
  std::string error_body;
  FinishReasonFix finish(plan::says_stop_at_max_tokens(options_.engine_fork), body);
  auto res = upstream_->stream(
      "/v1/chat/completions", upstream_body,
      {.on_start = [&](int s, const std::string&) {
         out.status = s;
         // An engine that accepted the request: the client's stream can start now.
         return s != 200 || relay->begin();
       },
       .on_data = [&](std::string_view data) {
         if (out.status != 200) {
           error_body.append(data);
           return error_body.size() < (1 << 20);
         }
         for (const auto& ev : parser.feed(data)) {
           if (ev.comment_only) continue;  // the engine's pings; kvgate sends its own
           bool forward = true;
           json chunk;
           if (ev.is_done()) {
             out.saw_done = true;
             forward = false;  // sent after the session is saved
           } else {
             chunk = json::parse(ev.data, nullptr, false);
             if (chunk.is_discarded() || !chunk.is_object()) {
               ++bad_events;  // not an OpenAI chunk: never relayed to the client
               forward = false;
             } else {
               if (chunk.contains("id") && chunk["id"].is_string()) chunk_id = chunk["id"].get<std::string>();
               if (chunk.contains("error")) {
                 const EngineErrorInfo e = classify_engine_error(500, ev.data);
                 if (e.kind == EngineErrorKind::kOutput) {
                   parse_error = e.message;
                   continue;  // replaced by the rescue below
                 }
                 if (e.kind == EngineErrorKind::kContextFilled && out.reply.has_output()) {
                   // The reply filled the context: it ends here, cut by length (below).
                   out.context_filled = true;
                   continue;
                 }
                 out.saw_error_event = true;
               }
               out.reply.add_chunk(chunk);
               if (auto p = chunk.find("prompt_progress"); p != chunk.end() && p->is_object()) {
                 relay->set_progress(fmt::format("prefill {}/{} tokens ({} cached)", p->value("processed", 0),
                                                 p->value("total", 0), p->value("cache", 0)));
                 forward = false;  // progress travels as keep-alive comments
               }
               const bool usage_only = chunk.contains("usage") && chunk.contains("choices") &&
                                       chunk["choices"].is_array() && chunk["choices"].empty();
               if (usage_only && !include_usage) forward = false;
               if (hold_calls && !holding && chunk.contains("choices") && chunk["choices"].is_array()) {
                 for (const auto& c : chunk["choices"]) {
                   if (c.is_object() && c.contains("delta") && c["delta"].is_object() && c["delta"].contains("tool_calls")) {
                     holding = true;
                   }
                 }
               }
               if (out.ttft_ms < 0 && out.reply.has_output()) out.ttft_ms = ms_since(t0);
             }
           }
           // A chunk goes through the finish-reason fix (which may hold it, or release a held
           // one on a chunk that is itself not relayed); [DONE] and non-JSON events never relay.
           std::vector<std::string> now;
           if (chunk.is_object()) {
             now = finish.on_chunk(chunk, ev.raw, forward);
           } else if (forward) {
             now.push_back(ev.raw);
           }
           for (const auto& raw : now) {
             if (holding) {
               held.push_back(raw);
             } else if (!relay->write(raw)) {
               return false;
             } else {
               out.relayed = true;
             }
           }
         }
         return !parser.failed();  // not an event stream: stop reading it
       }},
      upstream_timeout(prompt_tokens, false), &cancel);
  if (bad_events > 0) metrics_.add("engine_bad_events_total", static_cast<double>(bad_events));
  if (auto* err = std::get_if<UpstreamError>(&res)) {
    out.failure = from_upstream_error(*err);
    out.upstream_failure = err->kind;
  } else if (parser.failed()) {
    out.failure = bad_gateway(fmt::format("the engine's answer is not an event stream (a line longer than {} bytes)",
                                          kMaxEngineEventLine));
    if (options_.on_engine_failure) options_.on_engine_failure("the engine's stream is not server-sent events");
  } else if (out.status != 200) {
    note_engine_error(out.status, error_body);
    out.failure = from_engine_answer(out.status, error_body);
  } else if (parse_error && !cancel.cancelled()) {
    auto rescued = rescue_generation(body, first_call_id, cancel, *parse_error);
    if (rescued.ok()) {
      const std::string streamed = out.reply.content();
      const auto now = std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::system_clock::now().time_since_epoch()).count();
      auto chunk = [&](json delta, json reason) {
        return json{{"id", chunk_id}, {"object", "chat.completion.chunk"}, {"created", now}, {"model", model},
                    {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(reason)}}})}};
      };
      const json& m = rescued->message;
      const std::string content = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
      if (content.size() > streamed.size() && content.compare(0, streamed.size(), streamed) == 0) {
        relay->write(sse(chunk({{"content", content.substr(streamed.size())}}, nullptr)));
      }
      if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) {
        json calls = json::array();
        for (size_t i = 0; i < m["tool_calls"].size(); ++i) {
          json c = m["tool_calls"][i];
          c["index"] = i;
          calls.push_back(std::move(c));
        }
        relay->write(sse(chunk({{"tool_calls", calls}}, nullptr)));
      }
      relay->write(sse(chunk(json::object(), rescued->finish_reason)));
      if (include_usage) {
        relay->write(sse({{"id", chunk_id}, {"object", "chat.completion.chunk"}, {"created", now}, {"model", model},
                          {"choices", json::array()},
                          {"usage", {{"prompt_tokens", rescued->prompt_tokens},
                                     {"completion_tokens", rescued->completion_tokens},
                                     {"total_tokens", rescued->prompt_tokens + rescued->completion_tokens}}}}));
      }
      out.reply = ReplyAccumulator();
      out.reply.set_response(rescued_response(*rescued, model));
      out.rescued = true;
      out.saw_done = true;
      held.clear();
    } else {
      metrics_.add("rescues_total{outcome=\"failed\"}");
      out.failure = ApiError{.status = 500, .type = "server_error",
                             .message = *parse_error + " (rescue failed: " + rescued.error().message() + ")",
                             .code = "output_parse_error"};
    }
  } else if (out.context_filled) {
    // Ended like a reply max_tokens cut: the finish chunk, then [DONE] (sent by the caller).
    for (const auto& raw : finish.flush()) held.push_back(raw);
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
        std::chrono::system_clock::now().time_since_epoch()).count();
    held.push_back(sse({{"id", chunk_id}, {"object", "chat.completion.chunk"}, {"created", now}, {"model", model},
                        {"choices", json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "length"}}})}}));
    out.reply.set_finish_reason("length");
    out.saw_done = true;
    metrics_.add("context_filled_total");
  } else if (!out.saw_done && !out.saw_error_event && !cancel.cancelled()) {
    // The engine's stream ended early (crash, broken connection): say so in-stream.
    out.failure = bad_gateway(bad_events > 0 ? fmt::format("the engine's stream ended before completion ({} events "
                                                           "were not JSON and were dropped)",
                                                           bad_events)
                                             : std::string("the engine's stream ended before completion"));
    if (options_.on_engine_failure) options_.on_engine_failure("the engine's stream ended before completion");
  }
  if (!out.context_filled) {
    for (const auto& raw : finish.flush()) held.push_back(raw);
  }
  if (finish.rewrote()) out.reply.set_finish_reason("length");
  for (const auto& raw : held) {
    if (!relay->write(raw)) break;
  }
  return out;
}

}  // namespace kvgate::gateway
