#include "bench/chat_turn.h"

#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

// Fills failure, error and (for an overflow) the engine's prompt count from the error payload.
void classify(ChatAnswer& out, const std::string& transport, const json& error) {
  const Failure f = classify_failure(out.status, transport, error);
  out.failure = f.kind;
  out.error = f.message;
  if (out.ok()) return;
  out.reply.reset();
  out.usage = {};
  const json e = error.is_object() && error.contains("error") ? error["error"] : error;
  if (e.is_object() && e.contains("n_prompt_tokens") && e["n_prompt_tokens"].is_number_unsigned()) {
    out.overflow_prompt_tokens = e["n_prompt_tokens"];
  }
}

}  // namespace

ChatAnswer read_chat_answer(int status, const std::string& body, const std::string& transport, double ms) {
  ChatAnswer out;
  out.status = status;
  out.total_ms = ms;
  json error = nullptr;
  const json j = json::parse(body, nullptr, false);
  if (status != 200 && status != 0) {
    error = j.is_discarded() ? json(body) : j;
  } else if (status == 200) {
    out.usage = gateway::usage_from(j);
    out.ttft_ms = ms;
    if (j.is_object() && j.contains("choices") && j["choices"].is_array() && !j["choices"].empty() &&
        j["choices"][0].is_object() && j["choices"][0].contains("message")) {
      out.reply = j["choices"][0]["message"];
    } else {
      error = "the answer has no choices[0].message";
    }
  }
  classify(out, transport, error);
  return out;
}

ChatAnswer post_chat(HttpClient& client, const json& body) {
  const std::string text = util::json_text(body);
  const bool stream = body.is_object() && body.value("stream", false);
  if (!stream) {
    const HttpAnswer a = client.post(std::string(kChatPath), text);
    ChatAnswer out = read_chat_answer(a.status, a.body, a.transport_error, a.ms);
    out.request_bytes = text.size();
    return out;
  }
  ChatAnswer out;
  out.request_bytes = text.size();
  json error = nullptr;
  StreamedAnswer a = client.post_stream(std::string(kChatPath), text);
  out.status = a.status;
  out.total_ms = a.total_ms;
  out.ttft_ms = a.first_token_ms;
  if (a.status != 200 && a.status != 0) {
    error = json::parse(a.error_body, nullptr, false);
    if (error.is_discarded()) error = a.error_body;
  } else if (a.error) {
    error = *a.error;
  } else if (a.status == 200 && a.transport_error.empty() && !a.done) {
    error = "the stream ended without [DONE]";
  }
  out.usage = a.reply.usage();
  if (a.reply.has_output() || !a.reply.content().empty()) out.reply = a.reply.message();
  classify(out, a.transport_error, error);
  return out;
}

}  // namespace kvgate::bench
