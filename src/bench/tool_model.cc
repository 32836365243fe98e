#include "bench/tool_model.h"

#include <chrono>

#include <fmt/format.h>

#include "session/normalize.h"
#include "upstream/reply.h"
#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

constexpr std::string_view kCallOpen = "<tool_call>\n{\"name\": \"";
constexpr std::string_view kCallClose = "}\n</tool_call>";
constexpr std::string_view kArguments = "\"arguments\": ";
// A call of the grammar takes 40–50 tokens on the random-weight model, which writes most of it
// one character per token; a call is only started when 64 tokens are left for it.
constexpr int kTokensPerCall = 64;

// A GBNF string literal for `text`.
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The first string argument of a tool's schema (its first required one, else the first).
std::string first_argument(const json& function) {
  const json params = function.value("parameters", json::object());
  if (!params.is_object()) return {};
  if (params.contains("required") && params["required"].is_array() && !params["required"].empty() &&
      params["required"][0].is_string()) {
    return params["required"][0];
  }
  if (params.contains("properties") && params["properties"].is_object() && !params["properties"].empty()) {
    return params["properties"].begin().key();
  }
  return {};
}

json error_body(const std::string& message) {
  return {{"error", {{"code", 500}, {"message", message}, {"type", "server_error"}}}};
}

// The calls in a generation the grammar constrained; their ids hash the prompt and the text.
Result<json> parse_calls(const std::string& text, const std::string& prompt) {
  json calls = json::array();
  size_t pos = 0;
  while ((pos = text.find("<tool_call>\n", pos)) != std::string::npos) {
    const size_t start = pos + std::string_view("<tool_call>\n").size();
    const size_t end = text.find("\n</tool_call>", start);
    if (end == std::string::npos) return Error("a call is not closed: " + text.substr(pos, 200));
    const std::string inside = text.substr(start, end - start);
    const json call = json::parse(inside, nullptr, false);
    const size_t args = inside.find(kArguments);
    if (call.is_discarded() || !call.contains("name") || !call.contains("arguments") || args == std::string::npos) {
      return Error("a call is not JSON with name and arguments: " + inside);
    }
    // The arguments as generated (the template renders them back verbatim).
    const size_t from = args + kArguments.size();
    calls.push_back({{"type", "function"},
                     {"function", {{"name", call["name"]}, {"arguments", inside.substr(from, inside.size() - 1 - from)}}},
                     {"id", fmt::format("call_{:016x}_{}", session::hash64(prompt + text), calls.size())}});
    pos = end;
  }
  if (calls.empty()) return Error("the generation holds no call: " + text.substr(0, 200));
  return calls;
}

}  // namespace

bool requires_tool_call(const json& body) {
  return body.is_object() && body.contains("tools") && body["tools"].is_array() && !body["tools"].empty() &&
         body.value("tool_choice", json()) == "required";
}

std::string tool_call_grammar(const json& tools, int max_calls) {
  std::string alternatives;
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
    const json& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string()) continue;
    const std::string arg = first_argument(fn);
    std::string alt = literal(fn["name"].get<std::string>() + "\", \"arguments\": {");
    alt += arg.empty() ? " \"}\"" : " " + literal("\"" + arg + "\": \"") + " value " + literal("\"}");
    alternatives += (alternatives.empty() ? "" : " | ") + alt;
  }
  std::string root = "root ::= call";
  for (int i = 1; i < max_calls; ++i) root += " (\"\\n\" call)?";
  return fmt::format(
      "{}\n"
      "call ::= {} fn {}\n"
      "fn ::= {}\n"
      "value ::= [a-z0-9_./-] [a-z0-9_./-]? [a-z0-9_./-]? [a-z0-9_./-]? [a-z0-9_./-]? [a-z0-9_./-]? [a-z0-9_./-]? "
      "[a-z0-9_./-]?\n",
      root, literal(kCallOpen), literal(kCallClose), alternatives.empty() ? "\"\"" : alternatives);
}

gateway::UpstreamResponse answer_with_calls(gateway::Upstream& engine, const json& body, gateway::CancelScope* cancel) {
  const auto timeout = std::chrono::minutes(10);
  json render = body;
  render.erase("stream");
  render.erase("stream_options");
  auto rendered = engine.call("POST", "/apply-template", util::json_text(render), timeout, cancel);
  if (!rendered.ok()) return {502, util::json_text(error_body(rendered.error().message))};
  auto& r = *rendered;
  if (r.status != 200) return r;
  const json prompt = json::parse(r.body, nullptr, false);
  if (!prompt.is_object() || !prompt.contains("prompt")) return {500, util::json_text(error_body("no prompt rendered"))};
  const int max_tokens = std::max(kTokensPerCall, body.value("max_tokens", kTokensPerCall));
  json completion = {{"prompt", prompt["prompt"]},
                     {"n_predict", max_tokens},
                     {"grammar", tool_call_grammar(body["tools"], std::min(3, max_tokens / kTokensPerCall))},
                     {"cache_prompt", true},
                     {"stream", false}};
  for (const char* key : {"id_slot", "seed", "temperature", "top_k", "top_p"}) {
    if (body.contains(key)) completion[key] = body[key];
  }
  auto generated = engine.call("POST", "/completion", util::json_text(completion), timeout, cancel);
  if (!generated.ok()) return {502, util::json_text(error_body(generated.error().message))};
  auto& g = *generated;
  if (g.status != 200) return g;
  const json out = json::parse(g.body, nullptr, false);
  if (!out.is_object() || !out.contains("content") || !out["content"].is_string()) {
    return {500, util::json_text(error_body("the engine's /completion answer has no content"))};
  }
  auto calls = parse_calls(out["content"], prompt["prompt"].get<std::string>());
  if (!calls) return {500, util::json_text(error_body("the constrained generation did not parse: " + calls.error().message()))};
  const gateway::CompletionFigures f = gateway::completion_figures(out);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  json answer = {
      {"id", fmt::format("chatcmpl-toolmodel-{}", now)},
      {"object", "chat.completion"},
      {"created", now},
      {"model", body.value("model", "default")},
      {"choices", json::array({{{"index", 0},
                                {"message", {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", *calls}}},
                                {"finish_reason", "tool_calls"}}})},
      {"usage",
       {{"prompt_tokens", f.prompt_tokens},
        {"completion_tokens", f.generated_tokens},
        {"total_tokens", f.prompt_tokens + f.generated_tokens},
        {"prompt_tokens_details", {{"cached_tokens", f.cached_tokens}}}}}};
  if (out.contains("timings")) answer["timings"] = out["timings"];
  return {200, util::json_text(answer), "application/json"};
}

std::string as_event_stream(const std::string& completion_body) {
  const json j = json::parse(completion_body, nullptr, false);
  if (!j.is_object() || !j.contains("choices")) return completion_body;
  const json base = {{"id", j.value("id", "")}, {"object", "chat.completion.chunk"}, {"created", j.value("created", 0)},
                     {"model", j.value("model", "")}};
  auto event = [&](json extra) {
    json c = base;
    c.update(extra);
    return "data: " + util::json_text(c) + "\n\n";
  };
  json calls = j["choices"][0]["message"]["tool_calls"];
  for (size_t i = 0; i < calls.size(); ++i) calls[i]["index"] = i;
  std::string out = event({{"choices", json::array({{{"index", 0},
                                                      {"delta", {{"role", "assistant"}, {"content", nullptr},
                                                                 {"tool_calls", calls}}},
                                                      {"finish_reason", nullptr}}})}});
  out += event({{"choices", json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "tool_calls"}}})}});
  json last = {{"choices", json::array()}, {"usage", j["usage"]}};
  if (j.contains("timings")) last["timings"] = j["timings"];
  out += event(last);
  return out + "data: [DONE]\n\n";
}

gateway::UpstreamResult<gateway::UpstreamResponse> ToolModelUpstream::call(
    const std::string& method, const std::string& path, const std::string& body, std::chrono::milliseconds timeout,
    gateway::CancelScope* cancel) {
  if (method == "POST" && path == "/v1/chat/completions") {
    const json j = json::parse(body, nullptr, false);
    if (requires_tool_call(j)) return answer_with_calls(*inner_, j, cancel);
  }
  return inner_->call(method, path, body, timeout, cancel);
}

gateway::UpstreamResult<int> ToolModelUpstream::stream(const std::string& path, const std::string& body,
                                                                    const gateway::StreamHandlers& handlers,
                                                                    std::chrono::milliseconds idle_timeout,
                                                                    gateway::CancelScope* cancel) {
  if (path == "/v1/chat/completions") {
    const json j = json::parse(body, nullptr, false);
    if (requires_tool_call(j)) {
      const gateway::UpstreamResponse r = answer_with_calls(*inner_, j, cancel);
      const bool ok = r.status == 200;
      if (handlers.on_start && !handlers.on_start(r.status, ok ? "text/event-stream" : "application/json")) return r.status;
      if (handlers.on_data) handlers.on_data(ok ? as_event_stream(r.body) : r.body);
      return r.status;
    }
  }
  return inner_->stream(path, body, handlers, idle_timeout, cancel);
}

}  // namespace kvgate::bench
