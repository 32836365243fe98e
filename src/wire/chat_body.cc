#include "wire/chat_body.h"

#include "util/json.h"

namespace kvgate::wire {

using nlohmann::json;

json text_part(std::string text) { return {{"type", "text"}, {"text", std::move(text)}}; }

json image_part(std::string url) { return {{"type", "image_url"}, {"image_url", {{"url", std::move(url)}}}}; }

WireResult<ClientJson> function_tool(const Fields& tool, std::string_view schema_key, bool schema_required) {
  KV_ASSIGN_OR_RETURN(std::string name, tool.string("name"));
  KV_ASSIGN_OR_RETURN(auto description, tool.optional_string("description"));
  KV_ASSIGN_OR_RETURN(const ClientJson* schema, tool.optional_object(schema_key));
  if (schema == nullptr && schema_required) return tool.error(schema_key, "required");
  ClientJson fn = {{"name", std::move(name)}};
  if (description) fn["description"] = std::move(*description);
  fn["parameters"] =
      schema != nullptr ? *schema : ClientJson{{"type", "object"}, {"properties", ClientJson::object()}};
  return ClientJson{{"type", "function"}, {"function", std::move(fn)}};
}

WireResult<FunctionTools> add_function_tools(const Fields& request, const ToolShape& shape, json& chat,
                                             std::vector<std::string>& ignored) {
  FunctionTools out;
  KV_ASSIGN_OR_RETURN(const ClientJson* tools, request.optional_array("tools"));
  if (tools == nullptr) return out;
  ClientJson written = ClientJson::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    KV_ASSIGN_OR_RETURN(Fields t, Fields::of((*tools)[i], child_path("tools", i)));
    KV_ASSIGN_OR_RETURN(auto type, t.optional_string("type"));
    if (!type && shape.type_required) return t.error("type", "required");
    if (type && *type != shape.function_type) {
      ignored.push_back(t.path() + "=" + *type);
      continue;
    }
    KV_ASSIGN_OR_RETURN(ClientJson tool, function_tool(t, shape.schema_key, shape.schema_required));
    out.names.insert(tool["function"]["name"].get<std::string>());
    written.push_back(std::move(tool));
  }
  if (!written.empty()) {
    chat["tools"] = json(written);
    out.text = util::json_text(written);
  }
  return out;
}

void stream_with_usage(json& chat) {
  chat["stream"] = true;
  chat["stream_options"] = {{"include_usage", true}};
}

}  // namespace kvgate::wire
