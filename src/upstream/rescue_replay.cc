#include "upstream/rescue_replay.h"

#include <algorithm>
#include <array>
#include <atomic>

#include "upstream/engine_errors.h"
#include "upstream/reply.h"
#include "rescue/relaxed_json.h"

namespace kvgate::gateway {

using rescue::parse_strict_json;

namespace {

using nlohmann::json;

// Chat-completion fields that have no meaning for a raw completion of the rendered prompt.
constexpr std::array<std::string_view, 21> kChatOnly = {
    "messages", "tools", "tool_choice", "parallel_tool_calls", "functions", "function_call",
    "stream", "stream_options", "response_format", "chat_template_kwargs", "reasoning_format",
    "reasoning_effort", "n", "user", "model", "logprobs", "top_logprobs", "add_generation_prompt",
    "continue_final_message", "max_tokens", "max_completion_tokens"};

bool chat_only(std::string_view key) {
  for (auto k : kChatOnly) {
    if (k == key) return true;
  }
  return false;
}

const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

int int_field(const json& v, const char* key) {
  const json* it = member(v, key);
  if (!it || !it->is_number_integer()) return 0;
  auto n = it->get<int64_t>();
  return n < 0 || n > 1'000'000'000 ? 0 : static_cast<int>(n);
}

}  // namespace

uint32_t replay_seed() {
  static std::atomic<uint32_t> seed{0x6b76u};
  return seed.fetch_add(7919u) & 0x7fffffffu;
}

bool is_output_parse_error(int status, std::string_view message) {
  return status >= 500 && is_output_error_message(message);
}

json replay_completion_body(const json& chat_body, const json& prompt) {
  json body = json::object();
  if (chat_body.is_object()) {
    for (const auto& [key, value] : chat_body.items()) {
      if (!chat_only(key)) body[key] = value;
    }
    // response_format constrains the output with a grammar: carry it as json_schema.
    const json* rf = member(chat_body, "response_format");
    if (rf && !body.contains("json_schema")) {
      const json* type = member(*rf, "type");
      const json* schema = member(*rf, "json_schema");
      if (type && *type == "json_object") {
        body["json_schema"] = json{{"type", "object"}};
      } else if (type && *type == "json_schema" && schema && member(*schema, "schema")) {
        body["json_schema"] = *member(*schema, "schema");
      }
    }
    if (!body.contains("n_predict")) {
      for (const char* key : {"max_completion_tokens", "max_tokens"}) {
        const json* it = member(chat_body, key);
        if (it && it->is_number_integer()) {
          body["n_predict"] = *it;
          break;
        }
      }
    }
  }
  body["prompt"] = prompt;
  body["stream"] = true;
  body["cache_prompt"] = true;
  // The prefill's progress says how much of the prompt came from the cache even when the
  // engine refuses the output before its final figures.
  body["return_progress"] = true;
  return body;
}

void ReplayText::add_event(std::string_view data) {
  if (finished_ || failed_) return;
  auto v = parse_strict_json(data);
  if (!v || !v->is_object()) return;
  if (v->contains("error")) {
    failed_ = true;
    return;
  }
  if (const json* progress = member(*v, "prompt_progress"); progress && progress->is_object()) {
    if (int total = int_field(*progress, "total")) tokens_evaluated_ = total;
    tokens_cached_ = int_field(*progress, "cache");
    // "processed" counts the cached part too.
    tokens_computed_ = std::max(0, int_field(*progress, "processed") - tokens_cached_);
  }
  const json* c = member(*v, "content");
  if (c && c->is_string()) text_ += c->get_ref<const std::string&>();
  if (int p = int_field(*v, "tokens_predicted")) tokens_predicted_ = p;
  if (int e = int_field(*v, "tokens_evaluated")) tokens_evaluated_ = e;
  if (const CompletionFigures f = completion_figures(*v); f.known) {
    tokens_cached_ = static_cast<int>(std::min<uint64_t>(f.cached_tokens, 1'000'000'000));
    const uint64_t computed = f.prompt_tokens >= f.cached_tokens ? f.prompt_tokens - f.cached_tokens : 0;
    tokens_computed_ = static_cast<int>(std::min<uint64_t>(computed, 1'000'000'000));
  }
  const json* stop = member(*v, "stop");
  if (stop && stop->is_boolean() && stop->get<bool>()) {
    finished_ = true;
    // mainline: "stop_type": "limit"; ik: "stopped_limit": true
    const json* type = member(*v, "stop_type");
    const json* limit = member(*v, "stopped_limit");
    stopped_by_limit_ = (type && type->is_string() && *type == "limit") ||
                        (limit && limit->is_boolean() && limit->get<bool>());
  }
}

}  // namespace kvgate::gateway
