// What an engine's error answer means, for both forks, as the real builds answer
// (tests/fixtures/*/errors/ recorded by scripts/record-ik-fixtures.sh; the pinned build's by
// the e2e tests):
//   prompt larger than the context   mainline 400 exceed_context_size_error with
//                                    n_prompt_tokens and n_ctx; ik 500 "the request exceeds
//                                    the available context size, try increasing it" (no figures);
//                                    vLLM 400 "This model's maximum context length is N tokens.
//                                    However, you requested T tokens (P in the messages, …)" (or
//                                    "… your prompt contains at least P input tokens …"), SGLang
//                                    400 "The input (P tokens) is longer than the model's context
//                                    length (N tokens)."
//   context filled while generating  ik 500 "context_length_exceeded: the request exceeds the
//                                    available context size; context shift is disabled" — the
//                                    whole answer when not streamed, an error event after the
//                                    content when streamed (mainline ends with "length")
//   output the engine cannot use     mainline "The model produced output that does not match
//                                    the expected <format> format", "Failed to parse input at
//                                    pos N"; ik "[json.exception.type_error.316] invalid UTF-8
//                                    byte at index N: 0xXX" (its reply is not valid UTF-8)
//   chat template refused            "While executing …", "Jinja Exception"
// Anything else is kOther: not explained by the request, so possibly an engine in trouble.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::gateway {

// kUnsupportedInput: an image or audio part the engine cannot take (no projector loaded).
enum class EngineErrorKind { kOther, kPromptTooLong, kContextFilled, kOutput, kTemplate, kUnsupportedInput };

struct EngineErrorInfo {
  EngineErrorKind kind = EngineErrorKind::kOther;
  std::string message;         // the engine's message (or the start of a body that is not JSON)
  uint64_t prompt_tokens = 0;  // mainline's overflow figures; 0 when not given
  uint64_t n_ctx = 0;
};

// Classifies an error answer: `status` and the body (a JSON error object, or an error event's
// payload, or text).
EngineErrorInfo classify_engine_error(int status, std::string_view body);

// Whether `message` is the engine rejecting or failing to encode the generation (kOutput).
bool is_output_error_message(std::string_view message);

}  // namespace kvgate::gateway
