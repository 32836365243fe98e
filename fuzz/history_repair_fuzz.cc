// libFuzzer target: history repair on arbitrary JSON. The input is parsed as a request body
// ({"messages": [...], "tools": [...]}) or as a bare messages array. Repair must never crash;
// it must be deterministic, idempotent (a repaired history needs no more repairs) and
// prefix-stable (repairing the first k messages gives the first messages of the full repair).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "rescue/history_repair.h"
#include "rescue/relaxed_json.h"

namespace {

using nlohmann::json;
using namespace kvgate::rescue;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  json body = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !json_depth_within(body, 64)) return 0;
  json messages = body.is_object() ? body.value("messages", json()) : body;
  json tools = body.is_object() ? body.value("tools", json()) : json();

  HistoryRepairOptions options;
  options.convert_late_system_messages = size % 2 == 1;
  options.drop_empty_assistant_turns = size % 3 == 0;
  auto a = repair_history(messages, tools, options);
  auto b = repair_history(messages, tools, options);
  check(dump_json(a.messages) == dump_json(b.messages));
  check(dump_json(a.tools) == dump_json(b.tools));
  auto again = repair_history(a.messages, a.tools, options);
  check(!again.changed());

  if (messages.is_array() && messages.size() > 1) {
    json head = json::array();
    for (size_t i = 0; i + 1 < messages.size(); ++i) head.push_back(messages[i]);
    auto part = repair_history(head, json(), options).messages;
    auto whole = repair_history(messages, json(), options).messages;
    check(part.size() <= whole.size());
    for (size_t i = 0; i < part.size(); ++i) check(dump_json(part[i]) == dump_json(whole[i]));
  }
  return 0;
}
