#include "testing/filtering_proxy.h"

#include <chrono>
#include <optional>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace kvgate::testing {

FilteringProxy::FilteringProxy(uint16_t target_port, std::set<std::string> blocked, Answers answers)
    : target_port_(target_port),
      blocked_(std::move(blocked)),
      answers_(std::move(answers)),
      server_(std::make_unique<httplib::Server>()) {
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard lock(mu_);
      ++hits_[req.path];
    }
    if (blocked_.contains(req.path)) {
      res.status = 404;
      res.set_content(R"({"error":{"code":404,"message":"Not Found","type":"not_found_error"}})",
                      "application/json");
      return;
    }
    httplib::Client c("127.0.0.1", target_port_);
    c.set_read_timeout(600, 0);
    if (auto a = answers_.find(req.path); a != answers_.end()) {
      if (req.has_header("Authorization"))
        c.set_default_headers({{"Authorization", req.get_header_value("Authorization")}});
      a->second(req, res, c);
      return;
    }
    httplib::Headers headers;
    if (req.has_header("Authorization"))
      headers.emplace("Authorization", req.get_header_value("Authorization"));
    std::string target = req.path;
    if (!req.params.empty()) target = httplib::append_query_params(req.path, req.params);
    const std::string type = req.get_header_value("Content-Type");
    auto r = req.method == "GET"
                 ? c.Get(target, headers)
                 : c.Post(target, headers, req.body, type.empty() ? "application/json" : type);
    if (!r) {
      res.status = 502;
      res.set_content(httplib::to_string(r.error()), "text/plain");
      return;
    }
    res.status = r->status;
    const std::string content_type = r->get_header_value("Content-Type");
    res.set_content(r->body, content_type.empty() ? "application/json" : content_type);
  };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  const int port = server_->bind_to_any_port("127.0.0.1");
  port_ = port > 0 ? static_cast<uint16_t>(port) : 0;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // Bound and listening already (connections wait in the backlog); wait for the loop anyway.
  for (int i = 0; i < 1000 && !server_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FilteringProxy::~FilteringProxy() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

int FilteringProxy::hits(const std::string& path) const {
  std::lock_guard lock(mu_);
  auto it = hits_.find(path);
  return it == hits_.end() ? 0 : it->second;
}

namespace {

using nlohmann::json;

void answer_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// The engine's tokens of `text` (as its chat completions tokenise a prompt when `special`).
std::optional<json> engine_tokens(httplib::Client& engine, const std::string& text, bool special) {
  const json req = {{"content", text}, {"add_special", special}, {"parse_special", true}};
  auto r = engine.Post("/tokenize", req.dump(), "application/json");
  if (!r || r->status != 200) return std::nullopt;
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.contains("tokens")) return std::nullopt;
  return j["tokens"];
}

}  // namespace

FilteringProxy::Answers vllm_answers(uint32_t n_ctx, std::string model_id) {
  FilteringProxy::Answers out;
  out["/v1/models"] = [n_ctx, model_id](const httplib::Request&, httplib::Response& res, httplib::Client&) {
    answer_json(res, 200,
                {{"object", "list"},
                 {"data", json::array({{{"id", model_id},
                                        {"object", "model"},
                                        {"owned_by", "vllm"},
                                        {"root", model_id},
                                        {"max_model_len", n_ctx}}})}});
  };
  out["/tokenize"] = [n_ctx, model_id](const httplib::Request& req, httplib::Response& res,
                                       httplib::Client& engine) {
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) return answer_json(res, 400, {{"error", "not JSON"}});
    if (body.contains("model") && body["model"] != model_id) {
      return answer_json(res, 404, {{"error", {{"message", "The model does not exist."}, {"code", 404}}}});
    }
    std::string text;
    bool special = true;
    if (body.contains("messages")) {
      json render = {{"messages", body["messages"]},
                     {"add_generation_prompt", body.value("add_generation_prompt", true)}};
      for (const char* k : {"tools", "chat_template_kwargs"})
        if (body.contains(k)) render[k] = body[k];
      auto r = engine.Post("/apply-template", render.dump(), "application/json");
      if (!r || r->status != 200) return answer_json(res, 400, {{"error", "the template failed"}});
      text = json::parse(r->body).value("prompt", "");
    } else if (body.contains("prompt") && body["prompt"].is_string()) {
      text = body["prompt"].get<std::string>();
      special = body.value("add_special_tokens", true);
    } else {
      return answer_json(res, 400, {{"error", "give messages or prompt"}});
    }
    auto tokens = engine_tokens(engine, text, special);
    if (!tokens) return answer_json(res, 500, {{"error", "the tokenizer failed"}});
    answer_json(res, 200, {{"count", tokens->size()}, {"max_model_len", n_ctx}, {"tokens", *tokens}});
  };
  return out;
}

}  // namespace kvgate::testing
