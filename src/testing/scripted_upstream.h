// ScriptedUpstream: an engine for unit tests of the gateway (a whole chat turn without HTTP,
// a model or the engine), behind the gateway::Upstream interface. It answers what a turn asks
// of llama-server, with its shapes:
//   POST /apply-template      {"prompt": …}: each message as "<|im_start|>ROLE\nCONTENT<|im_end|>\n"
//                             (content parts joined, tool calls as their JSON), then
//                             "<|im_start|>assistant\n"
//   POST /tokenize            "<|im_start|>" and "<|im_end|>" one special token each (with
//                             parse_special), every other byte one token
//   POST /v1/chat/completions the next scripted answer (push), or a plain reply; whole or
//                             streamed (role, content, finish and usage chunks, then [DONE]),
//                             with the usage the engine would report: the prompt's tokens as
//                             above, and as cached the prefix it shares with the previous
//                             prompt of the same id_slot
//   POST /completion          (the rescue's replay) the scripted replay text, streamed
//   GET  /props               the slot's context
//   POST /slots/N?action=…     with keep_slot_states_in(DIR): save writes the slot's contents
//                             to DIR/FILENAME as a state file ("ggsq" header, then the text),
//                             restore reads one back into the slot, erase empties it;
//                             without: 501, as a server without --slot-save-path answers
// Every call is recorded (UpstreamDouble::calls).
//
// Thread-safety: all methods may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testing/upstream_double.h"
#include "upstream/upstream.h"

namespace kvgate::testing {

struct ScriptedAnswer {
  int status = 200;  // an HTTP error answer when not 200 (with `body`)
  std::string body;
  std::string content;        // the reply (200); a plain reply when empty
  nlohmann::json tool_calls;  // the reply's tool calls (array), if any
  // Streamed: after the content, this error event ends the stream (no finish chunk, no [DONE]).
  std::optional<nlohmann::json> stream_error;
  std::optional<gateway::UpstreamError> failure;  // no answer at all

  static ScriptedAnswer reply(std::string content);
  // llama-server's answer to a prompt larger than its context (400 exceed_context_size_error).
  static ScriptedAnswer overflow(uint64_t prompt_tokens, uint64_t n_ctx);
  // The engine's output parser rejecting the generation: a 500 when not streamed, an error
  // event after `streamed` content when streamed.
  static ScriptedAnswer output_parse_error(std::string streamed = "");
  // An error event in the stream after `streamed` content (the engine's own failure).
  static ScriptedAnswer stream_failure(std::string streamed, std::string message);
};

class ScriptedUpstream : public UpstreamDouble {
 public:
  explicit ScriptedUpstream(uint64_t context = 4096) : context_(context) {}

  // The next chat completion's answer (answers are taken in order; then plain replies).
  void push(ScriptedAnswer answer);
  // The text a rescue's replay (/completion) generates.
  void set_replay_text(std::string text);
  // Whether POST /apply-template is answered (false: 404, as a server without it answers).
  void set_renders(bool renders);
  // Answers the slot actions of KV state saving with files in `dir` (the engine's
  // --slot-save-path).
  void keep_slot_states_in(std::filesystem::path dir);

  // The prompt the template makes of `messages` (the engine's rendering as above).
  static std::string render(const nlohmann::json& messages);
  // Its tokens as the fake tokenizer counts them.
  static uint64_t tokens(const std::string& prompt);

  gateway::EngineEndpoint endpoint() override { return {.port = 1}; }

 protected:
  gateway::UpstreamResult<gateway::UpstreamResponse> answer(const Request& request) override;
  gateway::UpstreamResult<int> answer_stream(const Request& request,
                                             const gateway::StreamHandlers& handlers) override;

 private:
  ScriptedAnswer next_answer();
  // The usage and timings of `reply` to `prompt` in `slot`: the prompt's tokens and what the
  // slot had cached of them (the slot then holds both).
  nlohmann::json usage_for(const std::string& prompt, const std::string& reply, int slot);
  gateway::UpstreamResponse slot_action(const std::string& path, const nlohmann::json& request);
  nlohmann::json whole_answer(const ScriptedAnswer& a, const nlohmann::json& request);
  std::vector<std::string> stream_events(const ScriptedAnswer& a, const nlohmann::json& request);

  const uint64_t context_;
  mutable std::mutex mu_;
  std::deque<ScriptedAnswer> answers_;      // guarded by mu_
  std::string replay_text_ = "plain text";  // guarded by mu_
  bool renders_ = true;                     // guarded by mu_
  std::map<int, std::string> slot_prompt_;  // guarded by mu_: the last prompt per slot
  std::filesystem::path state_dir_;         // guarded by mu_
  uint64_t replies_ = 0;                    // guarded by mu_
};

}  // namespace kvgate::testing
