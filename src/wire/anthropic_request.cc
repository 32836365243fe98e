#include "wire/anthropic_request.h"

#include <algorithm>
#include <set>

#include "util/json.h"
#include "wire/chat_body.h"
#include "wire/context_edits.h"
#include "wire/fields.h"

namespace kvgate::wire {

using nlohmann::json;

namespace {

enum class Purpose { kMessages, kCountTokens };

// One Anthropic user turn as chat messages: its tool results first (one tool message each),
// then the rest of the turn as one user message.
struct UserTurn {
  json tool_messages = json::array();
  json parts = json::array();  // text and image_url parts, in block order
  bool has_image = false;
};

// A user message's content: one string when it holds only text (the form every chat
// template renders), else the parts.
json user_content(const json& parts, bool has_image) {
  if (has_image) return parts;
  std::vector<std::string> texts;
  for (const json& p : parts) texts.push_back(p["text"].get<std::string>());
  return join_texts(texts);
}

// The `source` object of an image or document block.
WireResult<Fields> source_of(const Fields& block) {
  KV_ASSIGN_OR_RETURN(const ClientJson* source, block.optional_object("source"));
  if (source == nullptr) return block.error("source", "required");
  return Fields(*source, block.path_of("source"));
}

WireResult<std::string> image_url(const Fields& block) {
  KV_ASSIGN_OR_RETURN(const Fields src, source_of(block));
  KV_ASSIGN_OR_RETURN(std::string type, src.string("type"));
  if (type == "base64") {
    KV_ASSIGN_OR_RETURN(std::string media_type, src.string("media_type"));
    KV_ASSIGN_OR_RETURN(std::string data, src.string("data"));
    return "data:" + media_type + ";base64," + data;
  }
  if (type == "url") return src.string("url");
  return src.error("type", "image source '" + type + "' is not supported (use base64 or url)");
}

WireResult<std::string> document_text(const Fields& block) {
  KV_ASSIGN_OR_RETURN(const Fields src, source_of(block));
  KV_ASSIGN_OR_RETURN(std::string type, src.string("type"));
  if (type != "text") return src.error("type", "document source '" + type + "' is not supported (only text)");
  return src.string("data");
}

// The text of a tool_result: its content string, or its blocks' texts joined. Images move
// to the user message (`turn`) that follows the tool messages.
WireResult<std::string> tool_result_text(const Fields& block, UserTurn& turn, ChatConversion& c) {
  const ClientJson* content = block.find("content");
  if (content == nullptr) return std::string();
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    return block.error("content", "expected a string or an array, got " + std::string(json_kind(*content)));
  }
  std::vector<std::string> texts;
  for (size_t i = 0; i < content->size(); ++i) {
    KV_ASSIGN_OR_RETURN(Fields part, Fields::of((*content)[i], child_path(block.path_of("content"), i)));
    KV_ASSIGN_OR_RETURN(std::string type, part.string("type"));
    if (type == "text") {
      KV_ASSIGN_OR_RETURN(std::string text, part.string("text"));
      texts.push_back(std::move(text));
    } else if (type == "image") {
      KV_ASSIGN_OR_RETURN(std::string url, image_url(part));
      turn.parts.push_back(image_part(std::move(url)));
      turn.has_image = true;
    } else if (type == "document") {
      KV_ASSIGN_OR_RETURN(std::string text, document_text(part));
      texts.push_back(std::move(text));
    } else {
      c.ignored.push_back(part.path_of("type") + "=" + type);
    }
  }
  return join_texts(texts);
}

WireResult<void> add_tool_result(const Fields& block, UserTurn& turn, ChatConversion& c) {
  KV_ASSIGN_OR_RETURN(std::string id, block.string("tool_use_id"));
  KV_ASSIGN_OR_RETURN(auto is_error, block.optional_bool("is_error"));
  KV_ASSIGN_OR_RETURN(std::string text, tool_result_text(block, turn, c));
  if (is_error.value_or(false)) text = text.empty() ? "Error" : "Error: " + text;
  turn.tool_messages.push_back(
      {{"role", "tool"}, {"tool_call_id", std::move(id)}, {"content", std::move(text)}});
  return {};
}

WireResult<void> add_user_block(const Fields& block, UserTurn& turn, ChatConversion& c) {
  KV_ASSIGN_OR_RETURN(std::string type, block.string("type"));
  if (type == "text") {
    KV_ASSIGN_OR_RETURN(std::string text, block.string("text"));
    turn.parts.push_back(text_part(std::move(text)));
  } else if (type == "image") {
    KV_ASSIGN_OR_RETURN(std::string url, image_url(block));
    turn.parts.push_back(image_part(std::move(url)));
    turn.has_image = true;
  } else if (type == "document") {
    KV_ASSIGN_OR_RETURN(std::string text, document_text(block));
    turn.parts.push_back(text_part(std::move(text)));
  } else if (type == "tool_result") {
    KV_TRY(add_tool_result(block, turn, c));
  } else if (type == "tool_use") {
    return block.error("type", "tool_use blocks belong in assistant messages");
  } else if (type != "thinking" && type != "redacted_thinking") {
    c.ignored.push_back(block.path_of("type") + "=" + type);
  }
  return {};
}

WireResult<void> add_user(const ClientJson& content, const std::string& path, json& out, ChatConversion& c) {
  UserTurn turn;
  for (size_t i = 0; i < content.size(); ++i) {
    KV_ASSIGN_OR_RETURN(Fields block, Fields::of(content[i], child_path(path, i)));
    KV_TRY(add_user_block(block, turn, c));
  }
  for (json& m : turn.tool_messages) out.push_back(std::move(m));
  if (!turn.parts.empty() || turn.tool_messages.empty()) {
    out.push_back({{"role", "user"}, {"content", user_content(turn.parts, turn.has_image)}});
  }
  c.has_images = c.has_images || turn.has_image;
  return {};
}

WireResult<json> tool_call(const Fields& block) {
  KV_ASSIGN_OR_RETURN(std::string id, block.string("id"));
  KV_ASSIGN_OR_RETURN(std::string name, block.string("name"));
  const ClientJson* input = block.find("input");
  const std::string arguments = input == nullptr ? "{}" : util::json_text(*input);
  return json{{"id", std::move(id)},
              {"type", "function"},
              {"function", {{"name", std::move(name)}, {"arguments", arguments}}}};
}

// `from`: the first block to convert (those before a compaction block are replaced by it).
WireResult<void> add_assistant(const ClientJson& content, const std::string& path, json& out,
                               ChatConversion& c, size_t from = 0) {
  std::vector<std::string> texts;
  json calls = json::array();
  for (size_t i = from; i < content.size(); ++i) {
    KV_ASSIGN_OR_RETURN(Fields block, Fields::of(content[i], child_path(path, i)));
    KV_ASSIGN_OR_RETURN(std::string type, block.string("type"));
    if (type == "text") {
      KV_ASSIGN_OR_RETURN(std::string text, block.string("text"));
      texts.push_back(std::move(text));
    } else if (type == "tool_use") {
      KV_ASSIGN_OR_RETURN(json call, tool_call(block));
      calls.push_back(std::move(call));
    } else if (type == "tool_result") {
      return block.error("type", "tool_result blocks belong in user messages");
    } else if (type != "thinking" && type != "redacted_thinking" && type != "compaction") {
      c.ignored.push_back(block.path_of("type") + "=" + type);
    }
  }
  if (texts.empty() && calls.empty() && from > 0) return {};  // the compaction block alone
  json message = {{"role", "assistant"}, {"content", join_texts(texts)}};
  if (!calls.empty()) {
    if (texts.empty()) message["content"] = nullptr;
    message["tool_calls"] = std::move(calls);
  }
  out.push_back(std::move(message));
  return {};
}

// Claude Code opens its system prompt with "x-anthropic-billing-header: cc_version=…;
// cc_entrypoint=…; cch=XXXXX;", where cch changes with every request: left as it is, no
// two requests would share a cached prompt past that point. Its value is masked.
std::string without_billing_stamp(std::string text) {
  constexpr std::string_view kHeader = "x-anthropic-billing-header:";
  if (text.rfind(kHeader, 0) != 0) return text;
  const size_t line_end = std::min(text.find('\n'), text.size());
  const size_t stamp = text.find("cch=", kHeader.size());
  if (stamp == std::string::npos || stamp > line_end) return text;
  for (size_t i = stamp + 4; i < line_end && text[i] != ';'; ++i) text[i] = '0';
  return text;
}

// Text blocks only (a system prompt): joined.
WireResult<std::string> system_text(const ClientJson& value, const std::string& path) {
  if (value.is_string()) return without_billing_stamp(value.get<std::string>());
  if (!value.is_array()) {
    return invalid_request(
        path, "expected a string or an array of text blocks, got " + std::string(json_kind(value)));
  }
  std::vector<std::string> texts;
  for (size_t i = 0; i < value.size(); ++i) {
    KV_ASSIGN_OR_RETURN(Fields block, Fields::of(value[i], child_path(path, i)));
    KV_ASSIGN_OR_RETURN(std::string type, block.string("type"));
    if (type != "text") return block.error("type", "expected a text block, got '" + type + "'");
    KV_ASSIGN_OR_RETURN(std::string text, block.string("text"));
    texts.push_back(without_billing_stamp(std::move(text)));
  }
  return join_texts(texts);
}

WireResult<void> add_message(const ClientJson& value, const std::string& path, json& out, ChatConversion& c,
                             size_t from_block) {
  KV_ASSIGN_OR_RETURN(Fields m, Fields::of(value, path));
  KV_ASSIGN_OR_RETURN(std::string role, m.string("role"));
  if (role != "user" && role != "assistant" && role != "system") {
    return m.error("role", "expected \"user\" or \"assistant\", got \"" + role + "\"");
  }
  const ClientJson* content = m.find("content");
  if (content == nullptr) return m.error("content", "required");
  if (role == "system") {
    KV_ASSIGN_OR_RETURN(std::string text, system_text(*content, m.path_of("content")));
    out.push_back({{"role", "system"}, {"content", std::move(text)}});
    return {};
  }
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", content->get<std::string>()}});
    return {};
  }
  if (!content->is_array()) {
    return m.error("content", "expected a string or an array of content blocks, got " +
                                  std::string(json_kind(*content)));
  }
  if (role == "user") return add_user(*content, m.path_of("content"), out, c);
  return add_assistant(*content, m.path_of("content"), out, c, from_block);
}

// Where the conversation resumes after the last compaction block of an assistant message
// that carries a summary (message index, block index after it); {0, 0} when there is none.
// A block whose content is null stands for a compaction that failed: it changes nothing.
bool has_string(const ClientJson& object, std::string_view key, std::string_view value) {
  if (!object.is_object()) return false;
  const auto it = object.find(key);
  return it != object.end() && it->is_string() && it->get_ref<const std::string&>() == value;
}

WireResult<std::pair<size_t, size_t>> after_compaction(const ClientJson& list, ChatConversion& c) {
  for (size_t i = list.size(); i-- > 0;) {
    const ClientJson& m = list[i];
    if (!has_string(m, "role", "assistant")) continue;
    const auto content = m.find("content");
    if (content == m.end() || !content->is_array()) continue;
    for (size_t b = content->size(); b-- > 0;) {
      const ClientJson& block = (*content)[b];
      if (!has_string(block, "type", "compaction")) continue;
      const auto summary = block.find("content");
      if (summary == block.end() || summary->is_null()) continue;
      const std::string path = child_path(child_path(child_path("messages", i), "content"), b);
      if (!summary->is_string() || summary->get<std::string>().empty()) {
        return invalid_request(child_path(path, "content"), "expected a non-empty string or null");
      }
      c.carried_summary = summary->get<std::string>();
      return std::pair<size_t, size_t>(i, b + 1);
    }
  }
  return std::pair<size_t, size_t>(0, 0);
}

WireResult<void> add_messages(const Fields& top, json& chat, ChatConversion& c) {
  json messages = json::array();
  if (const ClientJson* system = top.find("system")) {
    KV_ASSIGN_OR_RETURN(std::string text, system_text(*system, "system"));
    messages.push_back({{"role", "system"}, {"content", std::move(text)}});
  }
  KV_ASSIGN_OR_RETURN(const ClientJson* list, top.array("messages"));
  if (list->empty()) return top.error("messages", "at least one message is required");
  KV_ASSIGN_OR_RETURN(auto resume, after_compaction(*list, c));
  for (size_t i = resume.first; i < list->size(); ++i) {
    KV_TRY(add_message((*list)[i], child_path("messages", i), messages, c,
                       i == resume.first ? resume.second : 0));
  }
  chat["messages"] = std::move(messages);
  return {};
}

WireResult<void> add_tool_choice(const Fields& top, const std::set<std::string>& tools, json& chat,
                                 ChatConversion& c) {
  KV_ASSIGN_OR_RETURN(const ClientJson* choice, top.optional_object("tool_choice"));
  if (choice == nullptr) return {};
  const Fields tc(*choice, "tool_choice");
  KV_ASSIGN_OR_RETURN(std::string type, tc.string("type"));
  json value;
  if (type == "auto") {
    value = "auto";
  } else if (type == "any") {
    value = "required";
  } else if (type == "none") {
    value = "none";
  } else if (type == "tool") {
    KV_ASSIGN_OR_RETURN(std::string name, tc.string("name"));
    if (tools.count(name) == 0) return tc.error("name", "no tool named '" + name + "' in tools");
    value = {{"type", "function"}, {"function", {{"name", name}}}};
  } else {
    return tc.error("type", "expected auto, any, tool or none, got '" + type + "'");
  }
  if (tools.empty()) {
    c.ignored.push_back("tool_choice");
    return {};
  }
  chat["tool_choice"] = std::move(value);
  KV_ASSIGN_OR_RETURN(auto serial, tc.optional_bool("disable_parallel_tool_use"));
  if (serial.value_or(false)) chat["parallel_tool_calls"] = false;
  return {};
}

WireResult<void> add_sampling(const Fields& top, Purpose purpose, json& chat) {
  KV_ASSIGN_OR_RETURN(auto max_tokens, top.optional_integer("max_tokens", 1));
  if (!max_tokens && purpose == Purpose::kMessages) return top.error("max_tokens", "required");
  if (max_tokens) chat["max_tokens"] = *max_tokens;
  KV_ASSIGN_OR_RETURN(const ClientJson* stops, top.optional_array("stop_sequences"));
  if (stops != nullptr && !stops->empty()) {
    json stop = json::array();
    for (size_t i = 0; i < stops->size(); ++i) {
      if (!(*stops)[i].is_string())
        return invalid_request(child_path("stop_sequences", i), "expected a string");
      stop.push_back((*stops)[i].get<std::string>());
    }
    chat["stop"] = std::move(stop);
    chat["verbose"] = true;  // the engine then says which stop string ended the reply
  }
  KV_ASSIGN_OR_RETURN(auto temperature, top.optional_number("temperature"));
  if (temperature) chat["temperature"] = *temperature;
  KV_ASSIGN_OR_RETURN(auto top_p, top.optional_number("top_p"));
  if (top_p) chat["top_p"] = *top_p;
  KV_ASSIGN_OR_RETURN(auto top_k, top.optional_integer("top_k", 0));
  if (top_k) chat["top_k"] = *top_k;
  return {};
}

WireResult<void> add_thinking(const Fields& top, json& chat, ChatConversion& c) {
  KV_ASSIGN_OR_RETURN(const ClientJson* thinking, top.optional_object("thinking"));
  if (thinking == nullptr) return {};
  const Fields t(*thinking, "thinking");
  KV_ASSIGN_OR_RETURN(std::string type, t.string("type"));
  if (type == "enabled" || type == "adaptive") {
    chat["kvgate"] = {{"thinking", true}};
    KV_ASSIGN_OR_RETURN(auto budget, t.optional_integer("budget_tokens", 0));
    if (budget && type == "enabled") chat["thinking_budget_tokens"] = *budget;
  } else if (type == "disabled") {
    chat["kvgate"] = {{"thinking", false}};
  } else {
    c.ignored.push_back("thinking.type=" + type);
  }
  return {};
}

WireResult<ChatConversion> convert(const ClientJson& request, Purpose purpose) {
  KV_ASSIGN_OR_RETURN(Fields top, Fields::of(request, ""));
  ChatConversion c;
  if (purpose == Purpose::kMessages) {
    top.list_unknown(
        {"model", "messages", "system", "max_tokens", "metadata", "stop_sequences", "stream", "temperature",
         "top_p", "top_k", "tools", "tool_choice", "thinking", "context_management"},
        c.ignored);
    if (const ClientJson* cm = top.find("context_management")) {
      KV_ASSIGN_OR_RETURN(ContextEdits edits, anthropic_context_edits(*cm));
      c.edits = std::move(edits);
    }
  } else {
    top.list_unknown({"model", "messages", "system", "tools", "tool_choice", "thinking"}, c.ignored);
  }
  json chat = json::object();
  KV_ASSIGN_OR_RETURN(auto model, top.optional_string("model"));
  if (model) {
    c.model = *model;
    chat["model"] = *model;
  }
  KV_TRY(add_messages(top, chat, c));
  const ToolShape shape = {.function_type = "custom",
                           .type_required = false,
                           .schema_key = "input_schema",
                           .schema_required = true};
  KV_ASSIGN_OR_RETURN(FunctionTools tools, add_function_tools(top, shape, chat, c.ignored));
  c.tools_text = std::move(tools.text);
  KV_TRY(add_tool_choice(top, tools.names, chat, c));
  KV_TRY(add_thinking(top, chat, c));
  if (purpose == Purpose::kMessages) {
    KV_TRY(add_sampling(top, purpose, chat));
    KV_ASSIGN_OR_RETURN(auto stream, top.optional_bool("stream"));
    c.stream = stream.value_or(false);
    if (c.stream) stream_with_usage(chat);
    KV_ASSIGN_OR_RETURN(const ClientJson* metadata, top.optional_object("metadata"));
    if (metadata != nullptr) {
      KV_ASSIGN_OR_RETURN(auto user, Fields(*metadata, "metadata").optional_id("user_id"));
      if (user && !user->empty()) c.session_key = *user;
    }
  }
  c.chat = std::move(chat);
  return c;
}

}  // namespace

WireResult<ChatConversion> messages_to_chat(const ClientJson& request) {
  return convert(request, Purpose::kMessages);
}

WireResult<ChatConversion> count_tokens_to_chat(const ClientJson& request) {
  return convert(request, Purpose::kCountTokens);
}

ClientJson count_tokens_answer(int64_t input_tokens) { return {{"input_tokens", input_tokens}}; }

}  // namespace kvgate::wire
