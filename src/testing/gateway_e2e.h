// Test support for end-to-end gateway tests: the real pinned llama-server on a synthesized
// model (started as `kvgate bench` starts it, bench::LocalEngine), with a Gateway and its
// HttpServer in front, all on free loopback ports.
#pragma once

#include <httplib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/local_engine.h"
#include "gateway/gateway.h"
#include "gguf/synth.h"
#include "http/http_server.h"
#include "testing/engine_e2e.h"
#include "testing/upstream_double.h"

namespace kvgate::testing {

using gateway::CancelScope;
using gateway::EndpointProvider;
using gateway::EngineEndpoint;
using gateway::Gateway;
using gateway::GatewayOptions;
using gateway::HttpUpstream;
using gateway::StreamHandlers;
using gateway::Upstream;
using gateway::UpstreamError;
using gateway::UpstreamResponse;
using http::HttpServer;
using http::HttpServerOptions;

struct EngineOptions {
  // kIk: the ik_llama.cpp build of $KVGATE_IK_SERVER (engines_under_test.h), started with
  // --jinja and --context-shift off as kvgate starts it (ik's defaults are the opposite).
  plan::Fork fork = plan::Fork::kMainline;
  gguf::SynthSpec spec = *gguf::synth_defaults("qwen3");
  uint64_t context = 8192;        // -c
  int slots = 1;                  // -np
  std::vector<std::string> args;  // more engine flags
  // The model's template made prefix-stable and passed with --chat-template-file, as
  // `kvgate up` starts the engine (plan/chat_template.h); false: the model's own.
  bool stable_template = true;
};

// The engine (a bench::LocalEngine: random key, --metrics) + the model file it serves; stopped
// and removed on destruction.
class Engine {
 public:
  static std::unique_ptr<Engine> start(const EngineOptions& options);
  // A logit bias that makes the random-weight model answer with common English words: fast
  // and always valid text (random weights otherwise emit bytes that are not UTF-8, which the
  // engine's output parser rejects).
  const nlohmann::json& word_bias() const { return word_bias_; }
  EngineEndpoint endpoint() const;
  const std::string& api_key() const { return api_key_; }
  bool running() { return local_->running(); }
  const std::filesystem::path& model() const { return model_->path(); }
  plan::Fork fork() const { return fork_; }

 private:
  plan::Fork fork_ = plan::Fork::kMainline;
  std::unique_ptr<TempModel> model_;  // before local_: the engine stops before its model goes
  std::unique_ptr<bench::LocalEngine> local_;
  std::string api_key_;
  nlohmann::json word_bias_ = nlohmann::json::array();
};

// The real upstream, with every request kvgate sends to the engine kept (what the engine
// was asked is what the isolation tests judge). Thread-safe.
class RecordingUpstream : public UpstreamDouble {
 public:
  explicit RecordingUpstream(EndpointProvider provider) : inner_(std::move(provider)) {}
  EngineEndpoint endpoint() override { return inner_.endpoint(); }
  // The chat bodies sent so far, oldest first.
  std::vector<nlohmann::json> chat_bodies() const { return bodies("/v1/chat/completions"); }

 private:
  gateway::UpstreamResult<UpstreamResponse> answer(const Request& r) override {
    return inner_.call(r.method, r.path, r.body, r.timeout, r.cancel);
  }
  gateway::UpstreamResult<int> answer_stream(const Request& r, const StreamHandlers& handlers) override {
    return inner_.stream(r.path, r.body, handlers, r.timeout, r.cancel);
  }
  HttpUpstream inner_;
};

// A Gateway + HttpServer in front of an endpoint provider (or of a given upstream), wired as
// `kvgate up` wires them (the Gateway's check_head as the server's head check, unless `http`
// brings its own).
class Front {
 public:
  Front(EndpointProvider provider, GatewayOptions options, HttpServerOptions http = {});
  Front(std::shared_ptr<Upstream> upstream, GatewayOptions options, HttpServerOptions http = {});
  ~Front();
  uint16_t port() const { return server_->port(); }
  Gateway& gateway() { return *gateway_; }
  HttpServer& server() { return *server_; }
  httplib::Client client() const;

 private:
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<HttpServer> server_;
};

// POST JSON; returns status and parsed body (null when not JSON).
struct JsonAnswer {
  int status = 0;
  nlohmann::json body;
  std::string raw;
  httplib::Headers headers;
};
JsonAnswer post_json(httplib::Client& client, const std::string& path, const nlohmann::json& body,
                     const httplib::Headers& headers = {});

// A chat body that makes the random-weight model answer with plain English words (see
// Engine::word_bias; the default engine of the current test is used).
nlohmann::json plain_chat(nlohmann::json messages, int max_tokens = 8);
// The bias plain_chat uses (set by the most recently started Engine).
void set_default_word_bias(nlohmann::json bias);

// A bias (Engine::word_bias: [token id, bias] pairs) as llama-server flags, for requests whose
// wire format has no logit_bias field (Anthropic Messages, OpenAI Responses): "--logit-bias",
// "ID+BIAS" (or "ID-BIAS") per pair, for EngineOptions::args. Token ids are the tokenizer's,
// which every synthesized model of the same spec shares.
std::vector<std::string> word_bias_flags(const nlohmann::json& bias);

}  // namespace kvgate::testing
