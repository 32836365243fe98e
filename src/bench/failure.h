// Why a benchmark request failed, in the classes a context-management comparison needs:
//   context_overflow  the prompt did not fit the context (mainline 400
//                     exceed_context_size_error, ik "exceeds the available context size",
//                     kvgate's context_length_exceeded)
//   output_parse      the engine rejected its own generation ("... does not match the
//                     expected ... format"; random-weight models emit arbitrary bytes)
//   engine_error      any other error answer (HTTP status >= 400 or an in-stream error event)
//   transport         no HTTP answer at all (connection refused, time-out, broken stream)
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvgate::bench {

enum class FailureKind { kNone, kContextOverflow, kOutputParse, kEngineError, kTransport };
const char* failure_name(FailureKind kind);

struct Failure {
  FailureKind kind = FailureKind::kNone;
  std::string message;
};

// `status`: the HTTP status (0: none); `transport_error`: why there was none; `error`: the
// error payload — an answer body {"error": …} or an in-stream error event's value (null
// when there is none).
Failure classify_failure(int status, const std::string& transport_error, const nlohmann::json& error);

}  // namespace kvgate::bench
