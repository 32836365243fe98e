// What the client is told of an engine's error answer (api_error.h), from what the engine
// said (upstream/engine_errors.h: what an engine's error answer means).
#pragma once

#include <string_view>

#include "gateway/api_error.h"

namespace kvgate::gateway {

// An engine's error answer (or an error event's payload) as the client gets it: the engine's
// status (502 when it is not an error status), message, type, code and further fields; a
// body that is not an OpenAI error is quoted (its first 500 bytes) with code upstream_error;
// input the model cannot take (kUnsupportedInput, a 500 from the engine) is a 400.
ApiError engine_api_error(int status, std::string_view body);

}  // namespace kvgate::gateway
