// launch_args: ServerSettings -> the command line of one concrete llama-server build.
//
// A pure function of the abstract settings and the build's probed capabilities
// (plan/server_caps.h). It always passes the context, slots, GPU layers and both KV cache
// types explicitly (never the build's defaults or mainline's -fit adjustments), asks
// mainline for its allocation log lines (-lv 4, hidden below that level since ~b9181),
// turns mainline's -fit off when the build has it, and spells every other setting the way
// this build accepts it (e.g. `--context-shift on|off` on ik, `--context-shift` /
// `--no-context-shift` on mainline; `-fa on` or a bare `-fa` on older builds).
//
// A setting the build cannot express is an Error naming the setting, the value, the build
// and what to do; an unknown flag is never passed through. --host/--port are not included
// (engine::ServerProcess adds them).
#pragma once

#include <string>
#include <vector>

#include "plan/server_caps.h"
#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::plan {

Result<std::vector<std::string>> launch_args(const ServerSettings& settings, const ServerCaps& caps);

// The command line for printing: the value after --api-key replaced by "***".
std::string redacted_command_line(const std::vector<std::string>& argv);

}  // namespace kvgate::plan
