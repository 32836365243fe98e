#include "gateway/turn_request.h"

namespace kvgate::gateway {

using nlohmann::json;

ApiResult<PreparedChat> prepare_chat(json body, const RequestLimits& limits) {
  KV_TRY(check_chat_limits(body, limits));
  PreparedChat out;
  if (body.is_object() && body.contains("messages") && body["messages"].is_array()) {
    const bool had_tools = body.contains("tools");
    auto repaired = rescue::repair_history(std::move(body["messages"]), had_tools ? std::move(body["tools"]) : json());
    body["messages"] = std::move(repaired.messages);
    if (had_tools) body["tools"] = std::move(repaired.tools);
    out.repairs = std::move(repaired.repairs);
  }
  KV_ASSIGN_OR_RETURN(out.request, make_chat_request(std::move(body)));
  return out;
}

Stabilised stabilise(json& body, const session::ThinkingOptions& thinking,
                     const session::StabiliserOptions& stabiliser) {
  Stabilised s;
  s.thinking = session::apply_thinking_policy(body, thinking);
  json& messages = body["messages"];
  s.stripped = session::strip_history_reasoning(messages);
  s.reordered = stabiliser.reorder_tool_results ? session::reorder_tool_results(messages) : 0;
  return s;
}

}  // namespace kvgate::gateway
