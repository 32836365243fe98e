// ToolModel: the random-weight test model made to call tools when a client requires it, on
// the real engine.
//
// Why: the pinned engine does not enforce tool_choice "required" with kvgate's templates —
// measured on the tiny qwen3 model with the built-in template and with chatml-tools.jinja:
// none of 38 requests produced a call, the output is the same as under "auto" for the same
// seed (no grammar is applied) — and a random-weight model never writes "<tool_call>" on its own, so without help no
// simulated client would ever see a call, answer it, or re-send its results.
//
// What: a chat request that declares tools and sets tool_choice "required" is answered by a
// real generation of the engine, constrained by a grammar to the calls the template renders
// (`<tool_call>\n{"name": "NAME", "arguments": {"ARG": "VALUE"}}\n</tool_call>`, one or
// more, each for a declared tool and its first string argument): the prompt the
// engine would render for the request (POST /apply-template, the same body), then POST
// /completion on the request's slot with its seed and temperature, prompt cache on. So the
// engine prefills, reuses and caches exactly what it would for a model that calls tools, and
// kvgate sees an ordinary answer: an OpenAI chat.completion (content null, tool_calls, usage,
// the engine's timings), or for a streamed request its chunks. Every other request passes
// through untouched. n_predict is the request's max_tokens (at least 64); the grammar allows
// one call per 64 tokens of it (the random model spends 40–50 tokens on one, most of it a
// character per token), at most three.
//
// ToolModelUpstream is the gateway's upstream in the benchmark (LocalGateway over it); the
// direct path calls answer() itself. Thread-safety: stateless beyond the inner upstream.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "upstream/upstream.h"

namespace kvgate::bench {

// The request declares tools and requires a call (non-streamed or streamed).
bool requires_tool_call(const nlohmann::json& chat_body);

// GBNF for one to `max_calls` calls of the declared tools, as the template renders them.
std::string tool_call_grammar(const nlohmann::json& tools, int max_calls);

// The answer to a chat request that requires a call: status and body as the engine's
// /v1/chat/completions would give them (a 5xx with an OpenAI-format error when the engine
// failed or the generation did not parse).
gateway::UpstreamResponse answer_with_calls(gateway::Upstream& engine, const nlohmann::json& chat_body,
                                            gateway::CancelScope* cancel = nullptr);

// The same answer as the chunks of a streamed chat completion, each "data: …\n\n", then
// "data: [DONE]\n\n" (an error answer stays a complete body).
std::string as_event_stream(const std::string& completion_body);

class ToolModelUpstream : public gateway::Upstream {
 public:
  explicit ToolModelUpstream(std::shared_ptr<gateway::Upstream> inner) : inner_(std::move(inner)) {}
  gateway::UpstreamResult<gateway::UpstreamResponse> call(const std::string& method, const std::string& path,
                                                          const std::string& body, std::chrono::milliseconds timeout,
                                                          gateway::CancelScope* cancel) override;
  gateway::UpstreamResult<int> stream(const std::string& path, const std::string& body,
                                      const gateway::StreamHandlers& handlers, std::chrono::milliseconds idle_timeout,
                                      gateway::CancelScope* cancel) override;
  gateway::EngineEndpoint endpoint() override { return inner_->endpoint(); }

 private:
  std::shared_ptr<gateway::Upstream> inner_;
};

}  // namespace kvgate::bench
