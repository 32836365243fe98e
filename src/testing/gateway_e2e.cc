#include "testing/gateway_e2e.h"

#include <stdexcept>

#include "gguf/file.h"
#include "plan/chat_template.h"
#include "testing/engines_under_test.h"
#include "util/private_files.h"

namespace kvgate::testing {

using http::HttpRequest;
using http::ResponseWriter;

std::unique_ptr<Engine> Engine::start(const EngineOptions& options) {
  std::optional<std::string> server;  // the pinned build (or $KVGATE_SERVER)
  if (options.fork == plan::Fork::kIk) {
    auto ik = ik_server_under_test();
    if (!ik) throw std::runtime_error(kIkAbsent);
    server = ik->string();
  }
  auto model = TempModel::synthesize(options.spec, "gw_" + options.spec.arch);
  if (!model) throw std::runtime_error(model.error().message());
  std::unique_ptr<Engine> e(new Engine());
  e->fork_ = options.fork;
  e->model_ = std::make_unique<TempModel>(std::move(*model));
  std::vector<std::string> args = {"-t", engine_threads()};
  // --log-disable: ik would also write ./llama.log wherever the test runs.
  if (options.fork == plan::Fork::kIk) args.insert(args.end(), {"--jinja", "--context-shift", "off", "--log-disable"});
  if (options.stable_template) {
    auto file = gguf::File::open(e->model_->path());
    if (!file) throw std::runtime_error(file.error().message());
    const auto tmpl = file->get_string("tokenizer.chat_template");
    const plan::StableTemplate stable = plan::prefix_stable_template(tmpl.value_or(""));
    if (stable.patched()) {
      if (auto st = util::write_private_file(e->model_->template_path(), stable.text); !st) {
        throw std::runtime_error(st.error().message());
      }
      args.insert(args.end(), {"--chat-template-file", e->model_->template_path().string()});
    }
  }
  args.insert(args.end(), options.args.begin(), options.args.end());
  auto local = bench::LocalEngine::start({.model = e->model_->path(),
                                          .server = server,
                                          .context = options.context,
                                          .slots = options.slots,
                                          .extra_args = args,
                                          .ready_timeout = std::chrono::seconds(60)});
  if (!local) throw std::runtime_error(local.error().message());
  e->local_ = std::move(*local);
  const bench::Endpoint ep = e->local_->endpoint();
  e->api_key_ = ep.api_key;
  httplib::Client c(ep.host, ep.port);
  c.set_bearer_token_auth(e->api_key_.c_str());
  auto tok = c.Post("/tokenize", R"({"content":" the of and to a in is it that for on with as was he by at"})",
                    "application/json");
  if (!tok || tok->status != 200) throw std::runtime_error("tokenize failed while preparing the word bias");
  const auto tokens = nlohmann::json::parse(tok->body);
  for (const auto& id : tokens["tokens"]) e->word_bias_.push_back({id, 100});
  set_default_word_bias(e->word_bias_);
  return e;
}

EngineEndpoint Engine::endpoint() const {
  const bench::Endpoint ep = local_->endpoint();
  return {.host = ep.host, .port = ep.port, .api_key = ep.api_key, .available = true, .state = "ready"};
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

std::vector<std::string> word_bias_flags(const nlohmann::json& bias) {
  std::vector<std::string> flags;
  for (const auto& pair : bias) {
    const bool negative = pair[1].get<double>() < 0;
    flags.push_back("--logit-bias");
    flags.push_back(std::to_string(pair[0].get<int>()) + (negative ? "" : "+") + pair[1].dump());
  }
  return flags;
}

}  // namespace kvgate::testing
