#include "testing/turn_driver.h"

#include "gateway/chat_request.h"
#include "gateway/gateway.h"
#include "gateway/turn_request.h"
#include "http/http_server.h"
#include "testing/scripted_upstream.h"
#include "util/json.h"

namespace kvgate::testing {

using nlohmann::json;

namespace {

// Keeps the status and the body of one answer.
class Answer final : public http::ResponseWriter {
 public:
  Answer() : http::ResponseWriter(-1, false) {}
  bool send(int status, const http::HeaderList&, std::string_view body) override {
    status_ = status;
    body_ = body;
    return true;
  }
  bool begin_stream(int status, const http::HeaderList&) override {
    status_ = status;
    return true;
  }
  bool write(std::string_view data) override {
    body_ += data;
    return true;
  }
  bool end() override { return true; }
  bool client_gone() override { return false; }
  bool answered() const override { return status_ != 0; }
  int status() const override { return status_; }
  const std::string& body() const { return body_; }

 private:
  int status_ = 0;
  std::string body_;
};

std::string request_body(const json& messages) {
  return util::json_text(json{{"model", "m"}, {"max_tokens", 16}, {"messages", messages}});
}

}  // namespace

TurnDriver::TurnDriver(TurnDriverOptions options) : upstream_(std::make_shared<ScriptedUpstream>(100000)) {
  gateway::GatewayOptions o;
  o.api_keys = {"k1", "k2"};
  o.context_tokens = 100000;
  o.max_sessions = options.max_sessions;
  o.model_summaries = false;
  o.compaction = options.high_tokens > 0;
  if (options.high_tokens > 0) {
    o.context_tokens = options.high_tokens * 4 / 3;
    o.high_watermark_tokens = options.high_tokens;
    o.compaction_options.summaries = false;
    o.compaction_options.l1_threshold_tokens = options.high_tokens / 3;
    o.compaction_options.l1_keep_tokens = options.high_tokens / 8;
  }
  gateway_ = std::make_unique<gateway::Gateway>(std::move(o), upstream_);
}

TurnDriver::~TurnDriver() = default;

TurnDriver::Result TurnDriver::send(const std::string& key, const std::optional<std::string>& id,
                                    const json& messages, const json& reply) {
  ScriptedAnswer answer;
  if (auto c = reply.find("content"); c != reply.end() && c->is_string())
    answer.content = c->get<std::string>();
  if (auto t = reply.find("tool_calls"); t != reply.end() && t->is_array()) answer.tool_calls = *t;
  upstream_->push(std::move(answer));
  const size_t before = upstream_->calls("/v1/chat/completions").size();
  http::HttpRequest r;
  r.method = "POST";
  r.target = r.path = "/v1/chat/completions";
  r.remote = "127.0.0.1:1";
  r.body = request_body(messages);
  r.headers = {
      {"host", "127.0.0.1"}, {"content-type", "application/json"}, {"authorization", "Bearer " + key}};
  if (id) r.headers.emplace_back("x-session-id", *id);
  Result out;
  Answer w;
  const gateway::HeadVerdict head = gateway_->check_head(r);
  if (head.status != 0) {
    out.status = head.status;
    return out;
  }
  gateway_->handle(r, w);
  out.status = w.status();
  const auto calls = upstream_->calls("/v1/chat/completions");
  if (calls.size() > before) out.sent.view = calls.back().body.value("messages", json());
  if (out.status != 200) {
    out.sent.detail = w.body().substr(0, 300);
    return out;
  }
  const json answer_body = json::parse(w.body(), nullptr, false);
  if (answer_body.is_object() && answer_body.contains("choices") && answer_body["choices"].is_array() &&
      !answer_body["choices"].empty()) {
    out.reply = answer_body["choices"][0].value("message", json());
  }
  return out;
}

std::optional<json> TurnDriver::prepared(const json& messages) {
  auto body = gateway::parse_json_body(request_body(messages));
  if (!body.ok()) return std::nullopt;
  auto chat = gateway::prepare_chat(std::move(body).value(), gateway_->request_limits());
  if (!chat.ok()) return std::nullopt;
  json& prepared = chat->request.body;
  gateway::stabilise(prepared, gateway_->options().thinking, gateway_->options().stabiliser);
  return std::move(prepared["messages"]);
}

}  // namespace kvgate::testing
