// Pieces of the chat-completions bodies both request adapters build.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "wire/fields.h"

namespace kvgate::wire {

nlohmann::json text_part(std::string text);  // {"type": "text", "text": …}
nlohmann::json image_part(std::string url);  // {"type": "image_url", "image_url": {"url": …}}

// A chat function tool from a client's tool definition: name (required), description, and the
// JSON schema under `schema_key` (when absent: required → 400, else an empty object schema),
// with the schema's keys in the client's order.
WireResult<ClientJson> function_tool(const Fields& tool, std::string_view schema_key, bool schema_required);

// How an API marks its function tools among `tools`.
struct ToolShape {
  std::string_view function_type;  // the `type` of a function tool
  bool type_required = true;       // false: a tool without `type` is a function tool
  std::string_view schema_key;     // where its JSON schema is
  bool schema_required = true;
};

struct FunctionTools {
  std::set<std::string> names;
  // The chat body's tools as JSON text, keys in the order the client wrote its schemas (the
  // chat body's own value keeps them sorted); empty when there are none.
  std::string text;
};

// The function tools of the request's `tools` array, set as the chat body's tools (none:
// no `tools` key); every other tool is listed in `ignored` as "tools.N=TYPE".
WireResult<FunctionTools> add_function_tools(const Fields& request, const ToolShape& shape,
                                             nlohmann::json& chat, std::vector<std::string>& ignored);

// stream: true with stream_options.include_usage, so the last chunk carries the usage.
void stream_with_usage(nlohmann::json& chat);

}  // namespace kvgate::wire
