// FilteringProxy: an HTTP proxy on loopback in front of a real server that answers 404 for
// some paths, as a server without them would (e.g. an OpenAI-compatible server with no
// /apply-template or /tokenize), and passes everything else through unchanged (bodies
// buffered: for requests whose answers are not read as they stream). For end-to-end tests
// of what kvgate does when a server lacks an endpoint, with the real engine behind.
// Some paths may be answered by the proxy itself (`answers`), with the engine's help: e.g.
// vllm_answers(), which makes a llama-server look like vLLM where kvgate tells them apart.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace httplib {
class Client;
class Server;
struct Request;
struct Response;
}

namespace kvgate::testing {

class FilteringProxy {
 public:
  // An answer made by the proxy; `engine` is a client of the server behind it.
  using Answer = std::function<void(const httplib::Request&, httplib::Response&, httplib::Client& engine)>;
  using Answers = std::map<std::string, Answer>;  // by path

  // Listens on a free loopback port; answers `answers` itself, 404 for `blocked`, and
  // forwards all else to 127.0.0.1:`target_port`.
  FilteringProxy(uint16_t target_port, std::set<std::string> blocked, Answers answers = {});
  ~FilteringProxy();
  FilteringProxy(const FilteringProxy&) = delete;
  FilteringProxy& operator=(const FilteringProxy&) = delete;

  uint16_t port() const { return port_; }
  // Requests seen for `path` (blocked ones included).
  int hits(const std::string& path) const;

 private:
  uint16_t target_port_;
  std::set<std::string> blocked_;
  Answers answers_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, int> hits_;  // guarded by mu_
};

// A llama-server's answers in vLLM's shapes, where kvgate reads them: GET /v1/models (one
// model `model_id`, owned_by "vllm", max_model_len `n_ctx`) and POST /tokenize of chat
// messages ({"messages", "tools", "chat_template_kwargs", "add_generation_prompt"}: rendered
// with the engine's /apply-template and tokenised as its chat completions tokenise) or of a
// text ({"prompt", "add_special_tokens"}), answered {"count", "max_model_len", "tokens"}.
// With /apply-template, /detokenize and /props blocked, kvgate sees what vLLM offers.
FilteringProxy::Answers vllm_answers(uint32_t n_ctx, std::string model_id);

}  // namespace kvgate::testing
