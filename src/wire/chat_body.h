// Pieces of the chat-completions bodies both request adapters build.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "wire/fields.h"

namespace kvgate::wire {

nlohmann::json text_part(std::string text);     // {"type": "text", "text": …}
nlohmann::json image_part(std::string url);     // {"type": "image_url", "image_url": {"url": …}}

// A chat function tool from a client's tool definition: name (required), description, and the
// JSON schema under `schema_key` (when absent: required → 400, else an empty object schema).
WireResult<nlohmann::json> function_tool(const Fields& tool, std::string_view schema_key, bool schema_required);

// stream: true with stream_options.include_usage, so the last chunk carries the usage.
void stream_with_usage(nlohmann::json& chat);

}  // namespace kvgate::wire
