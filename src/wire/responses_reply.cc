#include "wire/responses_reply.h"

namespace kvgate::wire {

using nlohmann::json;

namespace {

std::string_view response_stem(std::string_view response_id) {
  constexpr std::string_view kPrefix = "resp_";
  if (response_id.substr(0, kPrefix.size()) == kPrefix) response_id.remove_prefix(kPrefix.size());
  return response_id;
}

}  // namespace

std::string_view status_name(ResponseStatus status) {
  switch (status) {
    case ResponseStatus::kInProgress:
      return "in_progress";
    case ResponseStatus::kCompleted:
      return "completed";
    case ResponseStatus::kIncomplete:
      return "incomplete";
    case ResponseStatus::kFailed:
      break;
  }
  return "failed";
}

ClientJson compaction_item(std::string_view response_id, const std::string& encrypted_content) {
  return {{"id", "cmp_" + std::string(response_stem(response_id))},
          {"type", "compaction"},
          {"encrypted_content", encrypted_content}};
}

std::string item_id(BlockKind kind, std::string_view response_id, size_t output_index) {
  std::string id = kind == BlockKind::kReasoning ? "rs_" : kind == BlockKind::kText ? "msg_" : "fc_";
  id += response_stem(response_id);
  id += '_';
  id += std::to_string(output_index);
  return id;
}

ClientJson output_item(BlockKind kind, std::string_view response_id, size_t output_index,
                       const std::string& text, const std::string& call_id, const std::string& name,
                       std::string_view status) {
  const bool done = status != "in_progress";
  const std::string id = item_id(kind, response_id, output_index);
  switch (kind) {
    case BlockKind::kReasoning: {
      ClientJson content = ClientJson::array();
      if (done) content.push_back({{"type", "reasoning_text"}, {"text", text}});
      return {{"id", id},
              {"type", "reasoning"},
              {"summary", ClientJson::array()},
              {"content", std::move(content)},
              {"status", status}};
    }
    case BlockKind::kText: {
      ClientJson content = ClientJson::array();
      if (done) content.push_back(output_text_part(text));
      return {{"id", id},
              {"type", "message"},
              {"status", status},
              {"role", "assistant"},
              {"content", std::move(content)}};
    }
    case BlockKind::kToolCall:
      break;
  }
  return {{"id", id},           {"type", "function_call"},
          {"status", status},   {"arguments", done ? text : std::string()},
          {"call_id", call_id}, {"name", name}};
}

ClientJson output_text_part(const std::string& text) {
  return {{"type", "output_text"},
          {"text", text},
          {"annotations", ClientJson::array()},
          {"logprobs", ClientJson::array()}};
}

ClientJson responses_usage(const ChatUsage& usage) {
  return {{"input_tokens", usage.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
          {"output_tokens", usage.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", usage.reasoning_tokens}}},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

ClientJson response_object(const ResponsesConversion& conversion, const std::string& response_id,
                           int64_t created_at, ResponseStatus status, ClientJson output,
                           const std::optional<ChatUsage>& usage, ClientJson error) {
  const ClientJson& echo = conversion.echo;
  auto echoed = [&echo](const char* key) { return echo.contains(key) ? echo[key] : ClientJson(nullptr); };
  ClientJson incomplete = nullptr;
  if (status == ResponseStatus::kIncomplete) incomplete = {{"reason", "max_output_tokens"}};
  return {{"id", response_id},
          {"object", "response"},
          {"created_at", created_at},
          {"status", status_name(status)},
          {"error", std::move(error)},
          {"incomplete_details", std::move(incomplete)},
          {"instructions", echoed("instructions")},
          {"max_output_tokens", echoed("max_output_tokens")},
          {"model", conversion.model},
          {"output", std::move(output)},
          {"parallel_tool_calls", echoed("parallel_tool_calls")},
          {"previous_response_id", echoed("previous_response_id")},
          {"reasoning", echoed("reasoning")},
          {"store", echoed("store")},
          {"temperature", echoed("temperature")},
          {"text", echoed("text")},
          {"tool_choice", echoed("tool_choice")},
          {"tools", echoed("tools")},
          {"top_p", echoed("top_p")},
          {"truncation", "disabled"},
          {"usage", usage ? responses_usage(*usage) : ClientJson(nullptr)},
          {"metadata", echoed("metadata")}};
}

ClientJson chat_to_response(const json& chat_response, const ResponsesConversion& conversion,
                            const std::string& response_id, int64_t created_at) {
  const ChatReply reply = read_reply(chat_response);
  const ResponseStatus status =
      reply.finish_reason == "length" ? ResponseStatus::kIncomplete : ResponseStatus::kCompleted;
  ClientJson output = ClientJson::array();
  auto add = [&](BlockKind kind, const std::string& text, const std::string& call_id,
                 const std::string& name) {
    output.push_back(output_item(kind, response_id, output.size(), text, call_id, name, "completed"));
  };
  if (!reply.reasoning.empty()) add(BlockKind::kReasoning, reply.reasoning, "", "");
  if (!reply.text.empty()) add(BlockKind::kText, reply.text, "", "");
  for (const ToolCall& call : reply.tool_calls) add(BlockKind::kToolCall, call.arguments, call.id, call.name);
  if (status == ResponseStatus::kIncomplete && !output.empty()) output.back()["status"] = "incomplete";
  return response_object(conversion, response_id, created_at, status, std::move(output), reply.usage);
}

json output_to_chat_messages(const ClientJson& response) {
  json messages = json::array();
  if (!response.is_object() || !response.contains("output")) return messages;
  ItemNotes notes;
  (void)items_to_chat(response["output"], "output", messages, notes);  // our own output: nothing to refuse
  return messages;
}

ClientJson responses_error_body(const WireError& error) {
  return {{"error",
           {{"message", error.message},
            {"type", error.type},
            {"param", error.param.empty() ? ClientJson(nullptr) : ClientJson(error.param)},
            {"code", nullptr}}}};
}

}  // namespace kvgate::wire
