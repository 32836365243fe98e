#include "testing/turn_driver.h"

#include "gateway/gateway.h"
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
  answer.content = reply.value("content", "");
  upstream_->push(std::move(answer));
  const size_t before = upstream_->calls("/v1/chat/completions").size();
  http::HttpRequest r;
  r.method = "POST";
  r.target = r.path = "/v1/chat/completions";
  r.remote = "127.0.0.1:1";
  r.body = util::json_text(json{{"model", "m"}, {"max_tokens", 16}, {"messages", messages}});
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
  if (out.status != 200) out.sent.detail = w.body().substr(0, 300);
  return out;
}

}  // namespace kvgate::testing
