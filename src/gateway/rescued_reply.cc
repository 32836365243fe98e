#include "gateway/rescued_reply.h"

#include <algorithm>

#include <fmt/format.h>

#include "rescue/history_repair.h"
#include "rescue/relaxed_json.h"

namespace kvgate::gateway {

using nlohmann::json;

namespace {

json chunk_of(const std::string& id, const std::string& model, int64_t created, json choices) {
  return {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
          {"choices", std::move(choices)}};
}

json delta_chunk(const std::string& id, const std::string& model, int64_t created, json delta, json reason) {
  return chunk_of(id, model, created,
                  json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(reason)}}}));
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

}  // namespace

Usage rescued_usage(const RefusedAttempt& refused, const ReplayFigures& replay, bool replay_delivered) {
  Usage u;
  if (!refused.prompt_known) return u;
  u.prompt_tokens = refused.prompt_tokens;
  u.cached_tokens = std::min(refused.cached_tokens, refused.prompt_tokens);
  u.prefilled_tokens = refused.computed_tokens + (replay.replayed ? replay.computed_tokens : 0);
  if (replay_delivered && replay.replayed) {
    u.completion_tokens = replay.generated_tokens;
  } else if (refused.generated_known) {
    u.completion_tokens = refused.generated_tokens;
  } else {
    return Usage();
  }
  u.known = true;
  return u;
}

bool rescue_delivered(const Rescue& r, const std::string& streamed) {
  if (r.calls > 0) return true;
  const json& m = r.message;
  const std::string content = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
  return content.size() >= streamed.size() && content.compare(0, streamed.size(), streamed) == 0;
}

json rescued_response(const Rescue& r, const std::string& model, int64_t created) {
  json out = {
      {"id", fmt::format("chatcmpl-kvgate-{}", created)},
      {"object", "chat.completion"},
      {"created", created},
      {"model", model},
      {"choices", json::array({{{"index", 0}, {"message", r.message}, {"finish_reason", r.finish_reason}}})},
      {"usage", usage_json(r.usage)},
      {"kvgate", r.raw ? json{{"rescued", true}, {"raw", true}} : json{{"rescued", true}}}};
  if (!r.usage.known) out.erase("usage");
  return out;
}

std::vector<json> rescued_chunks(const Rescue& r, const std::string& streamed, const std::string& chunk_id,
                                 const std::string& model, int64_t created, bool include_usage) {
  std::vector<json> out;
  const json& m = r.message;
  const std::string content = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
  if (content.size() > streamed.size() && content.compare(0, streamed.size(), streamed) == 0) {
    out.push_back(delta_chunk(chunk_id, model, created, {{"content", content.substr(streamed.size())}}, nullptr));
  }
  if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) {
    json calls = json::array();
    for (size_t i = 0; i < m["tool_calls"].size(); ++i) {
      json c = m["tool_calls"][i];
      c["index"] = i;
      calls.push_back(std::move(c));
    }
    out.push_back(delta_chunk(chunk_id, model, created, {{"tool_calls", calls}}, nullptr));
  }
  out.push_back(delta_chunk(chunk_id, model, created, json::object(), r.finish_reason));
  if (include_usage && r.usage.known) {
    json usage = chunk_of(chunk_id, model, created, json::array());
    usage["usage"] = usage_json(r.usage);
    out.push_back(std::move(usage));
  }
  return out;
}

json length_finish_chunk(const std::string& chunk_id, const std::string& model, int64_t created) {
  return delta_chunk(chunk_id, model, created, json::object(), "length");
}

bool has_unusable_arguments(const json& response) {
  auto choices = response.find("choices");
  if (choices == response.end() || !choices->is_array()) return false;
  for (const auto& c : *choices) {
    if (!c.is_object() || !c.contains("message") || !c["message"].is_object()) continue;
    const json& m = c["message"];
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (const auto& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) return true;
      const json& fn = call["function"];
      if (!fn.contains("arguments") || !fn["arguments"].is_string()) return true;
      auto parsed = rescue::parse_strict_json(fn["arguments"].get_ref<const std::string&>());
      if (!parsed || !parsed->is_object()) return true;
    }
  }
  return false;
}

json strict_repair(const json& view, const json& body) {
  auto rh = rescue::repair_history(view, body.contains("tools") ? body["tools"] : json(),
                                   {.convert_late_system_messages = true, .drop_empty_assistant_turns = true});
  return rh.messages;
}

}  // namespace kvgate::gateway
