// One attempt at sending a chat request to the engine and relaying its answer
// (Gateway::send_chat). An engine refusal because the prompt is larger than its context is
// reported as `overflow` and nothing is sent to the client, so the caller can compact and
// retry transparently.
#include <thread>

#include <fmt/format.h>

#include "gateway/gateway.h"
#include "gateway/sse.h"

namespace kvgate::gateway {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Recognises the engines' "prompt larger than the context" answers: mainline 400
// exceed_context_size_error (with n_prompt_tokens and n_ctx), ik 500 "exceeds the available
// context size" / context_length_exceeded.
bool is_overflow(int status, const std::string& body, uint64_t& prompt_tokens, uint64_t& n_ctx) {
  if (status != 400 && status != 500) return false;
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("error") || !j["error"].is_object()) {
    return body.find("exceeds the available context size") != std::string::npos ||
           body.find("context_length_exceeded") != std::string::npos;
  }
  const json& e = j["error"];
  const std::string type = e.value("type", "");
  const std::string message = e.value("message", "");
  const bool overflow = type == "exceed_context_size_error" || type == "context_length_exceeded" ||
                        message.find("exceeds the available context size") != std::string::npos ||
                        message.find("context_length_exceeded") != std::string::npos;
  if (overflow) {
    if (e.contains("n_prompt_tokens") && e["n_prompt_tokens"].is_number_unsigned()) prompt_tokens = e["n_prompt_tokens"];
    if (e.contains("n_ctx") && e["n_ctx"].is_number_unsigned()) n_ctx = e["n_ctx"];
  }
  return overflow;
}

}  // namespace

Gateway::SendOutcome Gateway::send_chat(const json& body, bool stream, bool include_usage, uint64_t prompt_tokens,
                                        ResponseWriter& writer, StreamRelay* relay, CancelScope& cancel,
                                        Clock::time_point t0) {
  SendOutcome out;
  const std::string upstream_body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!stream) {
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
    auto res = upstream_->call("POST", "/v1/chat/completions", upstream_body, upstream_timeout(prompt_tokens, true),
                               &cancel);
    done = true;
    watcher.join();
    if (auto* err = std::get_if<UpstreamError>(&res)) {
      out.failure = from_upstream_error(*err);
      return out;
    }
    auto& r = std::get<UpstreamResponse>(res);
    out.status = r.status;
    if (r.status != 200) {
      out.overflow = is_overflow(r.status, r.body, out.overflow_prompt_tokens, out.overflow_context);
      out.failure = from_engine_answer(r.status, r.body);
      return out;
    }
    auto j = json::parse(r.body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      out.failure = bad_gateway("the engine answered with a body that is not JSON");
      return out;
    }
    out.reply.set_response(j);
    out.ttft_ms = ms_since(t0);
    const bool changed = apply_empty_content_fallback(j, options_.thinking);
    out.final_body = changed ? j.dump(-1, ' ', false, json::error_handler_t::replace) : std::move(r.body);
    return out;
  }

  SseParser parser;
  std::string error_body;
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
           if (ev.is_done()) {
             out.saw_done = true;
             forward = false;  // sent after the session is saved
           } else {
             auto chunk = json::parse(ev.data, nullptr, false);
             if (!chunk.is_discarded()) {
               out.reply.add_chunk(chunk);
               if (chunk.contains("error")) out.saw_error_event = true;
               if (auto p = chunk.find("prompt_progress"); p != chunk.end() && p->is_object()) {
                 relay->set_progress(fmt::format("prefill {}/{} tokens ({} cached)", p->value("processed", 0),
                                                 p->value("total", 0), p->value("cache", 0)));
                 forward = false;  // progress travels as keep-alive comments
               }
               const bool usage_only = chunk.contains("usage") && chunk.contains("choices") &&
                                       chunk["choices"].is_array() && chunk["choices"].empty();
               if (usage_only && !include_usage) forward = false;
               if (out.ttft_ms < 0 && out.reply.has_output()) out.ttft_ms = ms_since(t0);
             }
           }
           if (forward && !relay->write(ev.raw)) return false;
         }
         return true;
       }},
      upstream_timeout(prompt_tokens, false), &cancel);
  if (auto* err = std::get_if<UpstreamError>(&res)) {
    out.failure = from_upstream_error(*err);
  } else if (out.status != 200) {
    out.overflow = is_overflow(out.status, error_body, out.overflow_prompt_tokens, out.overflow_context);
    out.failure = from_engine_answer(out.status, error_body);
  } else if (!out.saw_done && !out.saw_error_event && !cancel.cancelled()) {
    // The engine's stream ended early (crash, broken connection): say so in-stream.
    out.failure = bad_gateway("the engine's stream ended before completion");
  }
  return out;
}

}  // namespace kvgate::gateway
