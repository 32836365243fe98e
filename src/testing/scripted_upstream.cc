#include "testing/scripted_upstream.h"

#include <cstdlib>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "util/json.h"

namespace kvgate::testing {

using gateway::UpstreamResponse;
using gateway::UpstreamResult;
using nlohmann::json;

namespace {

constexpr std::string_view kStart = "<|im_start|>";
constexpr std::string_view kEnd = "<|im_end|>";

std::string content_text(const json& m) {
  auto c = m.find("content");
  if (c == m.end()) return "";
  if (c->is_string()) return c->get<std::string>();
  std::string out;
  if (c->is_array()) {
    for (const auto& part : *c) {
      if (part.is_object() && part.contains("text") && part["text"].is_string())
        out += part["text"].get<std::string>();
    }
  }
  return out;
}

std::string event(const json& data) { return "data: " + util::json_text(data) + "\n\n"; }

json chunk(const std::string& id, json choices) {
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", 1700000000},
          {"model", "fake"},
          {"choices", std::move(choices)}};
}

json delta(json d, json finish) {
  return json::array({{{"index", 0}, {"delta", std::move(d)}, {"finish_reason", std::move(finish)}}});
}

}  // namespace

ScriptedAnswer ScriptedAnswer::reply(std::string content) {
  ScriptedAnswer a;
  a.content = std::move(content);
  return a;
}

ScriptedAnswer ScriptedAnswer::overflow(uint64_t prompt_tokens, uint64_t n_ctx) {
  ScriptedAnswer a;
  a.status = 400;
  a.body = util::json_text(
      json{{"error",
            {{"code", 400},
             {"message", fmt::format("the request exceeds the available context size ({} tokens, context {})",
                                     prompt_tokens, n_ctx)},
             {"type", "exceed_context_size_error"},
             {"n_prompt_tokens", prompt_tokens},
             {"n_ctx", n_ctx}}}});
  return a;
}

ScriptedAnswer ScriptedAnswer::output_parse_error(std::string streamed) {
  ScriptedAnswer a;
  const json error = {
      {"error", {{"code", 500}, {"message", "Failed to parse input at pos 12"}, {"type", "server_error"}}}};
  a.status = 500;
  a.body = util::json_text(error);
  a.content = std::move(streamed);
  a.stream_error = error;
  return a;
}

ScriptedAnswer ScriptedAnswer::stream_failure(std::string streamed, std::string message) {
  ScriptedAnswer a;
  a.content = std::move(streamed);
  a.stream_error =
      json{{"error", {{"code", 500}, {"message", std::move(message)}, {"type", "server_error"}}}};
  return a;
}

void ScriptedUpstream::push(ScriptedAnswer answer) {
  std::lock_guard lock(mu_);
  answers_.push_back(std::move(answer));
}

void ScriptedUpstream::set_renders(bool renders) {
  std::lock_guard lock(mu_);
  renders_ = renders;
}

void ScriptedUpstream::set_replay_text(std::string text) {
  std::lock_guard lock(mu_);
  replay_text_ = std::move(text);
}

std::string ScriptedUpstream::render(const json& messages) {
  std::string out;
  for (const auto& m : messages) {
    std::string text = content_text(m);
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) text += util::json_text(m["tool_calls"]);
    out += fmt::format("{}{}\n{}{}\n", kStart, m.value("role", ""), text, kEnd);
  }
  return out + std::string(kStart) + "assistant\n";
}

uint64_t ScriptedUpstream::tokens(const std::string& prompt) {
  uint64_t n = 0;
  for (size_t i = 0; i < prompt.size();) {
    const std::string_view rest = std::string_view(prompt).substr(i);
    const size_t special = rest.starts_with(kStart) ? kStart.size()
                           : rest.starts_with(kEnd) ? kEnd.size()
                                                    : 0;
    i += special > 0 ? special : 1;
    ++n;
  }
  return n;
}

ScriptedAnswer ScriptedUpstream::next_answer() {
  std::lock_guard lock(mu_);
  ++replies_;
  if (answers_.empty()) return ScriptedAnswer::reply(fmt::format("reply {}", replies_));
  ScriptedAnswer a = std::move(answers_.front());
  answers_.pop_front();
  if (a.status == 200 && a.content.empty() && !a.tool_calls.is_array())
    a.content = fmt::format("reply {}", replies_);
  return a;
}

json ScriptedUpstream::usage_for(const std::string& prompt, const std::string& reply, int slot) {
  const uint64_t completion_tokens = tokens(reply);
  std::lock_guard lock(mu_);
  const std::string& before = slot_prompt_[slot];
  size_t common = 0;
  while (common < before.size() && common < prompt.size() && before[common] == prompt[common]) ++common;
  const uint64_t total = tokens(prompt);
  const uint64_t cached = std::min(tokens(prompt.substr(0, common)), total > 0 ? total - 1 : 0);
  slot_prompt_[slot] = prompt + reply;  // the slot holds the prompt and what was generated
  return {{"usage",
           {{"prompt_tokens", total},
            {"completion_tokens", completion_tokens},
            {"total_tokens", total + completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}}},
          {"timings",
           {{"cache_n", cached},
            {"prompt_n", total - cached},
            {"prompt_per_token_ms", 0.5},
            {"predicted_n", completion_tokens},
            {"predicted_per_second", 100.0}}}};
}

json ScriptedUpstream::whole_answer(const ScriptedAnswer& a, const json& request) {
  json message = {{"role", "assistant"}, {"content", a.content}};
  if (a.tool_calls.is_array()) message["tool_calls"] = a.tool_calls;
  const std::string prompt = render(request.value("messages", json::array()));
  json answer = {
      {"id", "chatcmpl-fake"},
      {"object", "chat.completion"},
      {"created", 1700000000},
      {"model", "fake"},
      {"choices", json::array({{{"index", 0},
                                {"message", message},
                                {"finish_reason", a.tool_calls.is_array() ? "tool_calls" : "stop"}}})}};
  answer.update(usage_for(prompt, a.content, request.value("id_slot", 0)));
  return answer;
}

std::vector<std::string> ScriptedUpstream::stream_events(const ScriptedAnswer& a, const json& request) {
  const std::string prompt = render(request.value("messages", json::array()));
  const json usage = usage_for(prompt, a.content, request.value("id_slot", 0));
  std::vector<std::string> out;
  if (request.value("return_progress", false)) {
    const uint64_t total = usage["usage"]["prompt_tokens"];
    json progress = chunk("chatcmpl-fake", json::array());
    progress["prompt_progress"] = {
        {"total", total}, {"cache", usage["timings"]["cache_n"]}, {"processed", total}};
    out.push_back(event(progress));
  }
  out.push_back(event(chunk("chatcmpl-fake", delta({{"role", "assistant"}, {"content", nullptr}}, nullptr))));
  if (!a.content.empty())
    out.push_back(event(chunk("chatcmpl-fake", delta({{"content", a.content}}, nullptr))));
  if (a.stream_error) {
    out.push_back(event(*a.stream_error));
    return out;
  }
  if (a.tool_calls.is_array()) {
    json calls = a.tool_calls;
    for (size_t i = 0; i < calls.size(); ++i) calls[i]["index"] = i;
    out.push_back(event(chunk("chatcmpl-fake", delta({{"tool_calls", calls}}, nullptr))));
  }
  out.push_back(
      event(chunk("chatcmpl-fake", delta(json::object(), a.tool_calls.is_array() ? "tool_calls" : "stop"))));
  json last = chunk("chatcmpl-fake", json::array());
  last.update(usage);
  out.push_back(event(last));
  out.push_back("data: [DONE]\n\n");
  return out;
}

void ScriptedUpstream::keep_slot_states_in(std::filesystem::path dir) {
  std::lock_guard lock(mu_);
  state_dir_ = std::move(dir);
}

UpstreamResponse ScriptedUpstream::slot_action(const std::string& path, const json& request) {
  auto error = [](int status, const std::string& message) {
    return UpstreamResponse{status,
                            util::json_text(json{{"error", {{"code", status}, {"message", message}}}}),
                            "application/json"};
  };
  const size_t q = path.find("?action=");
  const int slot = std::atoi(path.c_str() + std::string_view("/slots/").size());
  const std::string action = q == std::string::npos ? "" : path.substr(q + 8);
  std::lock_guard lock(mu_);
  if (state_dir_.empty()) return error(501, "This server does not support slots action.");
  if (action == "erase") {
    const uint64_t erased = tokens(slot_prompt_[slot]);
    slot_prompt_[slot].clear();
    return UpstreamResponse{200, util::json_text(json{{"id_slot", slot}, {"n_erased", erased}}),
                            "application/json"};
  }
  const std::string filename = request.value("filename", "");
  if (filename.empty() || filename.find('/') != std::string::npos) return error(400, "Invalid filename");
  const std::filesystem::path file = state_dir_ / filename;
  if (action == "save") {
    const std::string& text = slot_prompt_[slot];
    const uint32_t head[3] = {0x67677371u, 1, static_cast<uint32_t>(tokens(text))};
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(head), sizeof head);
    out << text;
    if (!out) return error(500, "failed to save the slot");
    return UpstreamResponse{200,
                            util::json_text(json{{"id_slot", slot},
                                                 {"filename", filename},
                                                 {"n_saved", head[2]},
                                                 {"n_written", sizeof head + text.size()},
                                                 {"timings", {{"save_ms", 0.1}}}}),
                            "application/json"};
  }
  if (action == "restore") {
    std::ifstream in(file, std::ios::binary);
    uint32_t head[3] = {0, 0, 0};
    if (!in.read(reinterpret_cast<char*>(head), sizeof head) || head[0] != 0x67677371u) {
      return error(400, "failed to restore the slot");
    }
    slot_prompt_[slot].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return UpstreamResponse{
        200,
        util::json_text(
            json{{"id_slot", slot}, {"filename", filename}, {"n_restored", head[2]}, {"n_read", 12}}),
        "application/json"};
  }
  return error(400, "Invalid action");
}

UpstreamResult<UpstreamResponse> ScriptedUpstream::answer(const Request& r) {
  const std::string& method = r.method;
  const std::string& path = r.path;
  const json& request = r.json;
  bool renders = true;
  {
    std::lock_guard lock(mu_);
    renders = renders_;
  }
  if (method == "GET" && path == "/props") {
    return UpstreamResponse{200,
                            util::json_text(json{{"default_generation_settings", {{"n_ctx", context_}}}}),
                            "application/json"};
  }
  if (path == "/apply-template" && !renders)
    return UpstreamResponse{404, R"({"error":"Not Found"})", "application/json"};
  if (path == "/apply-template") {
    return UpstreamResponse{
        200, util::json_text(json{{"prompt", render(request.value("messages", json::array()))}}),
        "application/json"};
  }
  if (path == "/tokenize") {
    const std::string text = request.value("content", "");
    json ids = json::array();
    for (size_t i = 0; i < text.size();) {
      const std::string_view rest = std::string_view(text).substr(i);
      if (rest.starts_with(kStart) || rest.starts_with(kEnd)) {
        ids.push_back(rest.starts_with(kStart) ? 1 : 2);
        i += rest.starts_with(kStart) ? kStart.size() : kEnd.size();
      } else {
        ids.push_back(256 + static_cast<unsigned char>(text[i]));
        ++i;
      }
    }
    return UpstreamResponse{200, util::json_text(json{{"tokens", ids}}), "application/json"};
  }
  if (method == "POST" && path.starts_with("/slots/")) return slot_action(path, request);
  if (path == "/v1/chat/completions") {
    const ScriptedAnswer a = next_answer();
    if (a.failure) return *a.failure;
    if (a.status != 200) return UpstreamResponse{a.status, a.body, "application/json"};
    return UpstreamResponse{200, util::json_text(whole_answer(a, request)), "application/json"};
  }
  return UpstreamResponse{404, R"({"error":{"code":404,"message":"not found","type":"not_found_error"}})",
                          "application/json"};
}

UpstreamResult<int> ScriptedUpstream::answer_stream(const Request& r,
                                                    const gateway::StreamHandlers& handlers) {
  const std::string& path = r.path;
  const json& request = r.json;
  std::vector<std::string> events;
  int status = 200;
  std::string error_body;
  if (path == "/completion") {
    std::string text;
    {
      std::lock_guard lock(mu_);
      text = replay_text_;
    }
    events.push_back(event({{"content", text}, {"stop", false}}));
    events.push_back(event({{"content", ""},
                            {"stop", true},
                            {"stop_type", "eos"},
                            {"tokens_predicted", 5},
                            {"tokens_evaluated", 40},
                            {"timings", {{"cache_n", 39}, {"prompt_n", 1}}}}));
  } else {
    const ScriptedAnswer a = next_answer();
    if (a.failure) return *a.failure;
    if (a.status != 200 && !a.stream_error) {
      status = a.status;
      error_body = a.body;
    } else {
      events = stream_events(a, request);
    }
  }
  if (handlers.on_start && !handlers.on_start(status, "text/event-stream")) return status;
  if (status != 200) {
    if (handlers.on_data) handlers.on_data(error_body);
    return status;
  }
  for (const auto& e : events) {
    if (handlers.on_data && !handlers.on_data(e)) break;
  }
  return status;
}

}  // namespace kvgate::testing
