#include "testing/gateway_e2e.h"

#include <unistd.h>

#include <fmt/format.h>

#include "engine/pinned.h"
#include "testing/engines_under_test.h"

namespace kvgate::testing {

using http::HttpRequest;
using http::ResponseWriter;

std::unique_ptr<Engine> Engine::start(const EngineOptions& options) {
  Result<std::filesystem::path> server_bin = engine::resolve_server();
  if (options.fork == plan::Fork::kIk) {
    auto ik = testing::ik_server_under_test();
    if (!ik) throw std::runtime_error(testing::kIkAbsent);
    server_bin = *ik;
  }
  if (!server_bin) throw std::runtime_error(server_bin.error().message());
  auto vocab_path = engine::vocab_file("qwen2");
  if (!vocab_path) throw std::runtime_error(vocab_path.error().message());
  auto vocab = gguf::File::open(*vocab_path);
  if (!vocab) throw std::runtime_error(vocab.error().message());
  static int counter = 0;
  std::unique_ptr<Engine> e(new Engine());
  e->model_ = std::filesystem::temp_directory_path() /
              fmt::format("kvgate_gw_{}_{}_{}.gguf", options.spec.arch, ::getpid(), counter++);
  auto written = gguf::synthesize(options.spec, &*vocab, e->model_);
  if (!written) throw std::runtime_error(written.error().message());
  e->api_key = options.engine_api_key;
  e->fork_ = options.fork;
  std::vector<std::string> args = {"-m", e->model_.string(), "-t", "2", "--api-key", e->api_key};
  // --log-disable: ik would also write ./llama.log wherever the test runs.
  if (options.fork == plan::Fork::kIk) args.insert(args.end(), {"--jinja", "--context-shift", "off", "--log-disable"});
  args.insert(args.end(), options.args.begin(), options.args.end());
  auto proc = engine::ServerProcess::start({.binary = *server_bin, .args = args});
  if (!proc) throw std::runtime_error(proc.error().message());
  e->process_ = std::move(*proc);
  if (auto ready = e->process_->wait_ready(std::chrono::seconds(60)); !ready) {
    throw std::runtime_error(ready.error().message());
  }
  httplib::Client c(e->process_->host(), e->process_->port());
  c.set_bearer_token_auth(e->api_key.c_str());
  auto tok = c.Post("/tokenize", R"({"content":" the of and to a in is it that for on with as was he by at"})",
                    "application/json");
  if (!tok || tok->status != 200) throw std::runtime_error("tokenize failed while preparing the word bias");
  const auto tokens = nlohmann::json::parse(tok->body);
  for (const auto& id : tokens["tokens"]) e->word_bias_.push_back({id, 100});
  set_default_word_bias(e->word_bias_);
  return e;
}

Engine::~Engine() {
  if (process_) process_->stop();
  std::error_code ec;
  std::filesystem::remove(model_, ec);
}

EngineEndpoint Engine::endpoint() const {
  return {.host = process_->host(), .port = process_->port(), .api_key = api_key, .available = true, .state = "ready"};
}

std::variant<UpstreamResponse, UpstreamError> RecordingUpstream::call(const std::string& method, const std::string& path,
                                                                     const std::string& body,
                                                                     std::chrono::milliseconds timeout,
                                                                     CancelScope* cancel) {
  record(path, body);
  return inner_.call(method, path, body, timeout, cancel);
}

std::variant<int, UpstreamError> RecordingUpstream::stream(const std::string& path, const std::string& body,
                                                           const StreamHandlers& handlers,
                                                           std::chrono::milliseconds idle_timeout, CancelScope* cancel) {
  record(path, body);
  return inner_.stream(path, body, handlers, idle_timeout, cancel);
}

void RecordingUpstream::record(const std::string& path, const std::string& body) {
  if (path != "/v1/chat/completions") return;
  std::lock_guard lock(mu_);
  bodies_.push_back(nlohmann::json::parse(body, nullptr, false));
}

std::vector<nlohmann::json> RecordingUpstream::chat_bodies() {
  std::lock_guard lock(mu_);
  return bodies_;
}

Front::Front(EndpointProvider provider, GatewayOptions options, HttpServerOptions http)
    : Front(std::make_shared<HttpUpstream>(std::move(provider)), std::move(options), std::move(http)) {}

Front::Front(std::shared_ptr<Upstream> upstream, GatewayOptions options, HttpServerOptions http) {
  gateway_ = std::make_unique<Gateway>(std::move(options), std::move(upstream));
  if (gateway_->options().kv.enabled()) {
    if (auto st = gateway_->open_kv_states(); !st) throw std::runtime_error(st.error().message());
  }
  http.port = 0;
  Gateway* g = gateway_.get();
  if (!http.head_check) http.head_check = [g](const HttpRequest& head) { return g->check_head(head); };
  server_ = std::make_unique<HttpServer>(http, [g](const HttpRequest& r, ResponseWriter& w) { g->handle(r, w); });
  if (auto st = server_->start(); !st) throw std::runtime_error(st.error().message());
}

Front::~Front() { server_->stop(); }

httplib::Client Front::client() const {
  httplib::Client c("127.0.0.1", server_->port());
  c.set_read_timeout(std::chrono::seconds(120));
  return c;
}

JsonAnswer post_json(httplib::Client& client, const std::string& path, const nlohmann::json& body,
                     const httplib::Headers& headers) {
  JsonAnswer a;
  auto res = client.Post(path.c_str(), headers, body.dump(), "application/json");
  if (!res) return a;
  a.status = res->status;
  a.raw = res->body;
  a.headers = res->headers;
  a.body = nlohmann::json::parse(res->body, nullptr, false);
  if (a.body.is_discarded()) a.body = nullptr;
  return a;
}

namespace {
nlohmann::json& default_bias() {
  static nlohmann::json bias = nlohmann::json::array();
  return bias;
}
}  // namespace

void set_default_word_bias(nlohmann::json bias) { default_bias() = std::move(bias); }

nlohmann::json plain_chat(nlohmann::json messages, int max_tokens) {
  return {{"messages", std::move(messages)}, {"max_tokens", max_tokens}, {"logit_bias", default_bias()}};
}

}  // namespace kvgate::testing
