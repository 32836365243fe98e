#include "wire/anthropic_reply.h"

namespace kvgate::wire {

using nlohmann::json;

ClientJson tool_input(const std::string& arguments) {
  ClientJson parsed = ClientJson::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return ClientJson::object();
  return parsed;
}

std::string message_id(std::string_view chat_id) { return "msg_" + id_stem(chat_id); }

std::string anthropic_stop_reason(std::string_view finish_reason, bool has_tool_calls,
                                  std::string_view stop_word) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "compaction") return "compaction";  // kvgate's: a paused compaction
  if (has_tool_calls) return "tool_use";
  if (finish_reason == "content_filter") return "refusal";
  if (!stop_word.empty()) return "stop_sequence";
  return "end_turn";
}

ClientJson anthropic_stop_sequence(std::string_view finish_reason, bool has_tool_calls,
                                   std::string_view stop_word) {
  if (anthropic_stop_reason(finish_reason, has_tool_calls, stop_word) != "stop_sequence") return nullptr;
  return std::string(stop_word);
}

ClientJson anthropic_usage(const ChatUsage& usage) {
  return {{"input_tokens", usage.prompt_tokens - usage.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", usage.cached_tokens},
          {"output_tokens", usage.completion_tokens}};
}

ClientJson chat_to_message(const json& chat_response, const std::string& model) {
  const ChatReply reply = read_reply(chat_response);
  ClientJson content = ClientJson::array();
  if (!reply.reasoning.empty()) {
    content.push_back({{"type", "thinking"}, {"thinking", reply.reasoning}, {"signature", ""}});
  }
  if (!reply.text.empty()) content.push_back({{"type", "text"}, {"text", reply.text}});
  for (const ToolCall& call : reply.tool_calls) {
    content.push_back(
        {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", tool_input(call.arguments)}});
  }
  return {
      {"id", message_id(reply.id)},
      {"type", "message"},
      {"role", "assistant"},
      {"model", model},
      {"content", std::move(content)},
      {"stop_reason", anthropic_stop_reason(reply.finish_reason, !reply.tool_calls.empty(), reply.stop_word)},
      {"stop_sequence",
       anthropic_stop_sequence(reply.finish_reason, !reply.tool_calls.empty(), reply.stop_word)},
      {"usage", anthropic_usage(reply.usage.value_or(ChatUsage{}))}};
}

ClientJson anthropic_error_body(const WireError& error) {
  return {{"type", "error"}, {"error", {{"type", error.type}, {"message", error.message}}}};
}

WireError anthropic_error(int status, std::string message) {
  WireError e;
  e.message = std::move(message);
  e.status = status;
  switch (status) {
    case 400:
      e.type = "invalid_request_error";
      break;
    case 401:
      e.type = "authentication_error";
      break;
    case 403:
      e.type = "permission_error";
      break;
    case 404:
      e.type = "not_found_error";
      break;
    case 413:
      e.type = "request_too_large";
      break;
    case 429:
      e.type = "rate_limit_error";
      break;
    case 503:
    case 529:
      e.status = 529;
      e.type = "overloaded_error";
      break;
    case 504:
      e.type = "timeout_error";
      break;
    default:
      e.type = status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
      break;
  }
  if (e.status < 400 || e.status > 599) e.status = 500;
  return e;
}

WireError anthropic_error_from_openai(int status, const json& body) {
  std::string message;
  if (body.is_object()) {
    if (auto err = body.find("error"); err != body.end() && err->is_object()) {
      if (auto m = err->find("message"); m != err->end() && m->is_string()) message = m->get<std::string>();
    }
  }
  if (message.empty()) message = "the request failed with HTTP status " + std::to_string(status);
  return anthropic_error(status, std::move(message));
}

}  // namespace kvgate::wire
