#include "wire/responses_request.h"

#include <set>

#include "wire/chat_body.h"
#include "wire/context_edits.h"
#include "wire/fields.h"

namespace kvgate::wire {

using nlohmann::json;

namespace {

// The texts and images of a content list (message content or a function call's output).
struct Content {
  std::vector<std::string> texts;
  json parts = json::array();  // text and image_url parts in order
  bool has_image = false;
};

WireResult<void> add_part(const Fields& part, Content& content, ItemNotes& notes) {
  KV_ASSIGN_OR_RETURN(std::string type, part.string("type"));
  if (type == "input_text" || type == "output_text" || type == "refusal") {
    KV_ASSIGN_OR_RETURN(std::string text, part.string(type == "refusal" ? "refusal" : "text"));
    content.parts.push_back(text_part(text));
    content.texts.push_back(std::move(text));
  } else if (type == "input_image") {
    KV_ASSIGN_OR_RETURN(auto url, part.optional_string("image_url"));
    if (!url) {
      if (part.find("file_id") != nullptr)
        return part.error("file_id", "file ids are not supported; send image_url");
      return part.error("image_url", "required");
    }
    content.parts.push_back(image_part(std::move(*url)));
    content.has_image = true;
  } else if (type == "input_file") {
    return part.error("type", "input_file is not supported");
  } else {
    notes.ignored.push_back(part.path_of("type") + "=" + type);
  }
  return {};
}

WireResult<Content> read_content(const ClientJson& value, const std::string& path, ItemNotes& notes) {
  Content content;
  if (value.is_string()) {
    content.texts.push_back(value.get<std::string>());
    content.parts.push_back(text_part(value.get<std::string>()));
    return content;
  }
  if (!value.is_array()) {
    return invalid_request(
        path, "expected a string or an array of content parts, got " + std::string(json_kind(value)));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    KV_ASSIGN_OR_RETURN(Fields part, Fields::of(value[i], child_path(path, i)));
    KV_TRY(add_part(part, content, notes));
  }
  return content;
}

// Builds chat messages from items in order. Function calls join the assistant message just
// before them; images of function call outputs wait for the tool messages to end.
class ItemReader {
 public:
  ItemReader(json& messages, ItemNotes& notes) : messages_(messages), notes_(notes) {}

  WireResult<void> add(const ClientJson& value, const std::string& path) {
    KV_ASSIGN_OR_RETURN(Fields item, Fields::of(value, path));
    KV_ASSIGN_OR_RETURN(auto type, item.optional_string("type"));
    if (!type && item.find("role") != nullptr) type = "message";
    if (!type) return item.error("type", "required");
    if (*type == "function_call") return add_call(item);
    if (*type == "function_call_output") return add_output(item);
    flush_images();
    if (*type == "message") return add_message(item);
    if (*type == "reasoning") return {};  // keeps an assistant message open for its calls
    open_assistant_ = false;
    if (*type == "compaction") return add_compaction(item);
    if (*type == "item_reference") {
      return item.error("type",
                        "item references are not supported; send the items or use previous_response_id");
    }
    notes_.ignored.push_back(item.path_of("type") + "=" + *type);
    return {};
  }

  void finish() { flush_images(); }

 private:
  WireResult<void> add_message(const Fields& item) {
    KV_ASSIGN_OR_RETURN(std::string role, item.string("role"));
    if (role == "developer") role = "system";
    if (role != "user" && role != "assistant" && role != "system") {
      return item.error("role", "expected user, assistant, system or developer, got \"" + role + "\"");
    }
    const ClientJson* value = item.find("content");
    if (value == nullptr) return item.error("content", "required");
    KV_ASSIGN_OR_RETURN(Content content, read_content(*value, item.path_of("content"), notes_));
    if (content.has_image && role != "user")
      return item.error("content", "images are supported in user messages only");
    notes_.has_images = notes_.has_images || content.has_image;
    json message = {{"role", role}};
    message["content"] = content.has_image ? std::move(content.parts) : json(join_texts(content.texts));
    messages_.push_back(std::move(message));
    open_assistant_ = role == "assistant";
    return {};
  }

  WireResult<void> add_call(const Fields& item) {
    KV_ASSIGN_OR_RETURN(std::string call_id, item.string("call_id"));
    KV_ASSIGN_OR_RETURN(std::string name, item.string("name"));
    KV_ASSIGN_OR_RETURN(auto arguments, item.optional_string("arguments"));
    flush_images();
    json call = {{"id", std::move(call_id)},
                 {"type", "function"},
                 {"function", {{"name", std::move(name)}, {"arguments", arguments.value_or("{}")}}}};
    if (!open_assistant_) {
      messages_.push_back({{"role", "assistant"}, {"content", nullptr}});
      open_assistant_ = true;
    }
    json& message = messages_.back();
    if (message["content"] == "") message["content"] = nullptr;
    message["tool_calls"].push_back(std::move(call));
    return {};
  }

  WireResult<void> add_output(const Fields& item) {
    KV_ASSIGN_OR_RETURN(std::string call_id, item.string("call_id"));
    const ClientJson* output = item.find("output");
    std::string text;
    if (output != nullptr) {
      KV_ASSIGN_OR_RETURN(Content content, read_content(*output, item.path_of("output"), notes_));
      text = join_texts(content.texts);
      for (json& part : content.parts) {
        if (part["type"] == "image_url") pending_images_.push_back(std::move(part));
      }
      notes_.has_images = notes_.has_images || content.has_image;
    }
    messages_.push_back(
        {{"role", "tool"}, {"tool_call_id", std::move(call_id)}, {"content", std::move(text)}});
    open_assistant_ = false;
    return {};
  }

  // A compaction item stands for everything before it: what came before goes.
  WireResult<void> add_compaction(const Fields& item) {
    KV_ASSIGN_OR_RETURN(std::string token, item.string("encrypted_content"));
    auto summary = summary_of_compaction_token(token);
    if (!summary) {
      return item.error(
          "encrypted_content",
          "this compaction item was not written by kvgate (another server's compaction cannot be read "
          "here); send the conversation's messages instead");
    }
    messages_.clear();
    pending_images_ = json::array();
    notes_.carried_summary = std::move(*summary);
    return {};
  }

  void flush_images() {
    if (pending_images_.empty()) return;
    messages_.push_back({{"role", "user"}, {"content", std::move(pending_images_)}});
    pending_images_ = json::array();
    open_assistant_ = false;
  }

  json& messages_;
  ItemNotes& notes_;
  bool open_assistant_ = false;
  json pending_images_ = json::array();
};

WireResult<void> add_tool_choice(const Fields& top, const std::set<std::string>& tools, json& chat,
                                 std::vector<std::string>& ignored) {
  const ClientJson* choice = top.find("tool_choice");
  if (choice == nullptr) return {};
  json value;
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode != "auto" && mode != "none" && mode != "required") {
      return top.error("tool_choice", "expected auto, none, required or an object, got \"" + mode + "\"");
    }
    value = mode;
  } else {
    KV_ASSIGN_OR_RETURN(Fields tc, Fields::of(*choice, "tool_choice"));
    KV_ASSIGN_OR_RETURN(std::string type, tc.string("type"));
    if (type != "function") {
      ignored.push_back("tool_choice=" + type);
      return {};
    }
    KV_ASSIGN_OR_RETURN(std::string name, tc.string("name"));
    if (tools.count(name) == 0) return tc.error("name", "no function tool named '" + name + "' in tools");
    value = {{"type", "function"}, {"function", {{"name", name}}}};
  }
  if (tools.empty()) {
    ignored.push_back("tool_choice");
    return {};
  }
  chat["tool_choice"] = std::move(value);
  return {};
}

WireResult<void> add_text_format(const Fields& top, json& chat, std::vector<std::string>& ignored) {
  KV_ASSIGN_OR_RETURN(const ClientJson* text, top.optional_object("text"));
  if (text == nullptr) return {};
  const Fields t(*text, "text");
  t.list_unknown({"format"}, ignored);
  KV_ASSIGN_OR_RETURN(const ClientJson* format, t.optional_object("format"));
  if (format == nullptr) return {};
  const Fields f(*format, "text.format");
  KV_ASSIGN_OR_RETURN(std::string type, f.string("type"));
  if (type == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
  } else if (type == "json_schema") {
    KV_ASSIGN_OR_RETURN(const ClientJson* schema, f.optional_object("schema"));
    if (schema == nullptr) return f.error("schema", "required");
    KV_ASSIGN_OR_RETURN(auto name, f.optional_string("name"));
    json spec = {{"name", name.value_or("response")}, {"schema", json(*schema)}};
    KV_ASSIGN_OR_RETURN(auto strict, f.optional_bool("strict"));
    if (strict) spec["strict"] = *strict;
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
  } else if (type != "text") {
    return f.error("type", "expected text, json_object or json_schema, got '" + type + "'");
  }
  return {};
}

WireResult<void> add_reasoning(const Fields& top, json& chat, std::vector<std::string>& ignored) {
  KV_ASSIGN_OR_RETURN(const ClientJson* reasoning, top.optional_object("reasoning"));
  if (reasoning == nullptr) return {};
  const Fields r(*reasoning, "reasoning");
  r.list_unknown({"effort"}, ignored);
  KV_ASSIGN_OR_RETURN(auto effort, r.optional_string("effort"));
  if (effort) chat["kvgate"] = {{"thinking", *effort != "none" && *effort != "minimal"}};
  return {};
}

WireResult<void> add_sampling(const Fields& top, json& chat) {
  KV_ASSIGN_OR_RETURN(auto max_tokens, top.optional_integer("max_output_tokens", 1));
  if (max_tokens) chat["max_tokens"] = *max_tokens;
  KV_ASSIGN_OR_RETURN(auto temperature, top.optional_number("temperature"));
  if (temperature) chat["temperature"] = *temperature;
  KV_ASSIGN_OR_RETURN(auto top_p, top.optional_number("top_p"));
  if (top_p) chat["top_p"] = *top_p;
  KV_ASSIGN_OR_RETURN(auto parallel, top.optional_bool("parallel_tool_calls"));
  if (parallel) chat["parallel_tool_calls"] = *parallel;
  return {};
}

WireResult<void> refuse_unsupported(const Fields& top) {
  if (top.find("conversation") != nullptr) {
    return top.error("conversation", "conversations are not supported; use previous_response_id");
  }
  if (top.find("prompt") != nullptr) return top.error("prompt", "prompt templates are not supported");
  KV_ASSIGN_OR_RETURN(auto background, top.optional_bool("background"));
  if (background.value_or(false)) return top.error("background", "background mode is not supported");
  return {};
}

ClientJson echo_of(const Fields& top) {
  auto given = [&top](const char* key, ClientJson fallback) {
    const ClientJson* v = top.find(key);
    return v != nullptr ? *v : fallback;
  };
  return {{"instructions", given("instructions", nullptr)},
          {"max_output_tokens", given("max_output_tokens", nullptr)},
          {"metadata", given("metadata", ClientJson::object())},
          {"parallel_tool_calls", given("parallel_tool_calls", true)},
          {"previous_response_id", given("previous_response_id", nullptr)},
          {"reasoning", given("reasoning", {{"effort", nullptr}, {"summary", nullptr}})},
          {"store", given("store", true)},
          {"temperature", given("temperature", nullptr)},
          {"text", given("text", {{"format", {{"type", "text"}}}})},
          {"tool_choice", given("tool_choice", "auto")},
          {"tools", given("tools", ClientJson::array())},
          {"top_p", given("top_p", nullptr)}};
}

WireResult<void> add_input(const Fields& top, json& history, ItemNotes& notes) {
  const ClientJson* input = top.find("input");
  if (input == nullptr) return top.error("input", "required");
  if (input->is_string()) {
    history.push_back({{"role", "user"}, {"content", input->get<std::string>()}});
    return {};
  }
  if (!input->is_array())
    return top.error("input",
                     "expected a string or an array of items, got " + std::string(json_kind(*input)));
  return items_to_chat(*input, "input", history, notes);
}

WireResult<void> add_request_fields(const Fields& top, ResponsesConversion& c) {
  KV_ASSIGN_OR_RETURN(auto model, top.optional_string("model"));
  if (model) {
    c.model = *model;
    c.chat["model"] = *model;
  }
  KV_ASSIGN_OR_RETURN(auto stream, top.optional_bool("stream"));
  c.stream = stream.value_or(false);
  if (c.stream) stream_with_usage(c.chat);
  KV_ASSIGN_OR_RETURN(auto store, top.optional_bool("store"));
  c.store = store.value_or(true);
  KV_ASSIGN_OR_RETURN(c.previous_response_id, top.optional_id("previous_response_id"));
  KV_ASSIGN_OR_RETURN(auto cache_key, top.optional_id("prompt_cache_key"));
  if (cache_key && !cache_key->empty()) c.session_key = *cache_key;
  KV_ASSIGN_OR_RETURN(const ClientJson* metadata, top.optional_object("metadata"));
  (void)metadata;  // echoed only
  const ToolShape shape = {.function_type = "function",
                           .type_required = true,
                           .schema_key = "parameters",
                           .schema_required = false};
  KV_ASSIGN_OR_RETURN(FunctionTools tools, add_function_tools(top, shape, c.chat, c.ignored));
  c.tools_text = std::move(tools.text);
  KV_TRY(add_tool_choice(top, tools.names, c.chat, c.ignored));
  KV_TRY(add_sampling(top, c.chat));
  KV_TRY(add_text_format(top, c.chat, c.ignored));
  KV_TRY(add_reasoning(top, c.chat, c.ignored));
  return {};
}

}  // namespace

WireResult<void> items_to_chat(const ClientJson& items, const std::string& path, json& messages,
                               ItemNotes& notes) {
  if (!items.is_array())
    return invalid_request(path, "expected an array of items, got " + std::string(json_kind(items)));
  ItemReader reader(messages, notes);
  for (size_t i = 0; i < items.size(); ++i) KV_TRY(reader.add(items[i], child_path(path, i)));
  reader.finish();
  return {};
}

WireResult<ResponsesConversion> responses_to_chat(const ClientJson& request, const json& previous_messages) {
  KV_ASSIGN_OR_RETURN(Fields top, Fields::of(request, ""));
  KV_TRY(refuse_unsupported(top));
  ResponsesConversion c;
  c.chat = json::object();
  top.list_unknown({"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens",
                    "temperature", "top_p", "reasoning", "text", "stream", "store", "previous_response_id",
                    "prompt_cache_key", "parallel_tool_calls", "metadata", "context_management"},
                   c.ignored);
  if (const ClientJson* cm = top.find("context_management")) {
    KV_ASSIGN_OR_RETURN(ContextEdits edits, responses_context_edits(*cm));
    c.edits = std::move(edits);
  }
  KV_TRY(add_request_fields(top, c));
  if (previous_messages.is_array()) c.history = previous_messages;
  c.previous_count = c.history.size();
  ItemNotes notes;
  KV_TRY(add_input(top, c.history, notes));
  c.has_images = notes.has_images;
  if (notes.carried_summary) {
    // The compaction replaced the previous response's conversation too.
    c.carried_summary = std::move(notes.carried_summary);
    c.previous_count = 0;
  }
  for (std::string& path : notes.ignored) c.ignored.push_back(std::move(path));
  json messages = json::array();
  KV_ASSIGN_OR_RETURN(auto instructions, top.optional_string("instructions"));
  if (instructions) messages.push_back({{"role", "system"}, {"content", *instructions}});
  for (const json& m : c.history) messages.push_back(m);
  c.chat["messages"] = std::move(messages);
  c.echo = echo_of(top);
  return c;
}

ClientJson input_tokens_answer(int64_t input_tokens) {
  return {{"object", "response.input_tokens"}, {"input_tokens", input_tokens}};
}

}  // namespace kvgate::wire
