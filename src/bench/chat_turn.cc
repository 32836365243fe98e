#include "bench/chat_turn.h"

#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

ChatAnswer post_chat(HttpClient& client, const json& body) {
  ChatAnswer out;
  const std::string text = util::json_text(body);
  out.request_bytes = text.size();
  const bool stream = body.is_object() && body.value("stream", false);
  json error = nullptr;
  std::string transport;
  if (stream) {
    StreamedAnswer a = client.post_stream(std::string(kChatPath), text);
    out.status = a.status;
    out.total_ms = a.total_ms;
    out.ttft_ms = a.first_token_ms;
    transport = a.transport_error;
    if (a.status != 200 && a.status != 0) {
      error = json::parse(a.error_body, nullptr, false);
      if (error.is_discarded()) error = a.error_body;
    } else if (a.error) {
      error = *a.error;
    } else if (a.status == 200 && transport.empty() && !a.done) {
      error = "the stream ended without [DONE]";
    }
    out.usage = a.reply.usage();
    if (a.reply.has_output() || !a.reply.content().empty()) out.reply = a.reply.message();
  } else {
    HttpAnswer a = client.post(std::string(kChatPath), text);
    out.status = a.status;
    out.total_ms = a.ms;
    transport = a.transport_error;
    const json j = a.json();
    if (a.status != 200 && a.status != 0) {
      error = j.is_null() ? json(a.body) : j;
    } else if (a.status == 200) {
      out.usage = gateway::usage_from(j);
      out.ttft_ms = a.ms;
      if (j.is_object() && j.contains("choices") && j["choices"].is_array() && !j["choices"].empty() &&
          j["choices"][0].is_object() && j["choices"][0].contains("message")) {
        out.reply = j["choices"][0]["message"];
      } else {
        error = "the answer has no choices[0].message";
      }
    }
  }
  const Failure f = classify_failure(out.status, transport, error);
  out.failure = f.kind;
  out.error = f.message;
  if (!out.ok()) {
    out.reply.reset();
    out.usage = {};
    const json e = error.is_object() && error.contains("error") ? error["error"] : error;
    if (e.is_object() && e.contains("n_prompt_tokens") && e["n_prompt_tokens"].is_number_unsigned()) {
      out.overflow_prompt_tokens = e["n_prompt_tokens"];
    }
  }
  return out;
}

}  // namespace kvgate::bench
