// libFuzzer target: tool-call recovery and the lenient JSON under it, on arbitrary bytes.
// Nothing may crash, hang or grow without bound; every recovered message must serialise to
// valid UTF-8 and every recovered call's arguments must be a JSON object; the text closer
// and the arguments repair must only ever produce valid JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "rescue/history_repair.h"
#include "rescue/relaxed_json.h"
#include "rescue/tool_call_parse.h"

namespace {

using nlohmann::json;
using namespace kvgate::rescue;

const json& tools() {
  static const json t = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
      "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
      "properties": {"query": {"type": "string"}, "limit": {"type": ["integer", "null"]},
      "filters": {"type": "object", "properties": {"lang": {"type": "string"}}},
      "tags": {"type": "array", "items": {"type": "string"}},
      "exact": {"anyOf": [{"type": "boolean"}, {"type": "number"}]}}}}},
    {"type": "function", "function": {"name": "one", "parameters": {"type": "object",
      "properties": {"x": {"type": "number"}}}}}])");
  return t;
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  ToolCallParseOptions options;
  options.accept_truncated = size % 2 == 1;
  options.extract_reasoning = size % 3 != 0;
  auto r = parse_tool_calls(text, tools(), options);
  check(is_valid_utf8(dump_json(r.message)));
  check(r.message.contains("content"));
  for (const auto& call : r.message.value("tool_calls", json::array())) {
    auto args = parse_strict_json(call["function"]["arguments"].get<std::string>());
    check(args.has_value() && args->is_object());
  }

  if (auto closed = close_truncated_json(text)) check(parse_strict_json(*closed).has_value());

  json as_string = std::string(text);
  RepairKind kind{};
  if (auto fixed = repair_arguments(&as_string, "_raw", &kind)) {
    auto v = parse_strict_json(*fixed);
    check(v.has_value() && v->is_object());
  }

  auto relaxed = parse_relaxed_value(text, 0, {.allow_truncated = size % 2 == 0});
  if (relaxed.ok()) check(relaxed->end <= size);
  return 0;
}
