// libFuzzer target: a client's chat request body, through what the gateway does to it before
// any engine sees it: JSON parsing, history repair, validation into a ChatRequest, the
// thinking policy, historical reasoning dropped, tool results put in call order, and the
// conversation's hash chain. Nothing may crash; a body that validates must keep validating
// after each step (the steps never make a valid request invalid), and the steps are
// deterministic.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/chat_request.h"
#include "gateway/history_repair.h"
#include "gateway/normalize.h"
#include "gateway/relaxed_json.h"
#include "gateway/stabiliser.h"
#include "gateway/thinking.h"

namespace {

using nlohmann::json;
using namespace kvgate::gateway;

void check(bool ok) {
  if (!ok) std::abort();
}

// The gateway's preprocessing of one body; returns the final body (null when refused).
json preprocess(std::string_view text, bool thinking_default) {
  json raw;
  if (parse_json_body(text, raw)) return nullptr;
  if (raw.is_object() && raw.contains("messages") && raw["messages"].is_array()) {
    const bool had_tools = raw.contains("tools");
    auto rh = repair_history(raw["messages"], had_tools ? raw["tools"] : json());
    raw["messages"] = std::move(rh.messages);
    if (had_tools) raw["tools"] = std::move(rh.tools);
  }
  ChatRequest req;
  if (make_chat_request(std::move(raw), req)) return nullptr;
  check(req.body.is_object() && req.body["messages"].is_array() && !req.body["messages"].empty());
  check(!validate_chat_body(req.body).has_value());
  ThinkingOptions options;
  options.default_on = thinking_default;
  apply_thinking_policy(req.body, options);
  strip_history_reasoning(req.body["messages"]);
  reorder_tool_results(req.body["messages"]);
  // The steps keep the request valid for the engine-bound flow.
  check(!validate_chat_body(req.body).has_value());
  const auto chain = chain_hashes(req.body["messages"]);
  check(chain.size() == req.body["messages"].size());
  return req.body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool thinking = size % 2 == 1;
  json a = preprocess(text, thinking);
  json b = preprocess(text, thinking);
  check(dump_json(a) == dump_json(b));
  // parse_chat_request (no repair) must agree with itself and never throw.
  ChatRequest direct;
  (void)parse_chat_request(text, direct);
  return 0;
}
