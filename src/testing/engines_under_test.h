// The engines the end-to-end tests run against: the pinned mainline build always, and a real
// ik_llama.cpp build when $KVGATE_IK_SERVER names one (a machine without one skips the ik
// cases with kIkAbsent as the reason). Test support only: production code never reads it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "plan/server_settings.h"

namespace kvgate::testing {

inline constexpr const char* kIkAbsent =
    "no ik_llama.cpp build to test against: set KVGATE_IK_SERVER=/path/to/ik_llama.cpp/bin/llama-server";

// The ik_llama.cpp llama-server named by $KVGATE_IK_SERVER, if it is an existing file.
inline std::optional<std::filesystem::path> ik_server_under_test() {
  const char* env = std::getenv("KVGATE_IK_SERVER");
  if (env == nullptr || *env == '\0') return std::nullopt;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(env, ec)) return std::nullopt;
  return std::filesystem::path(env);
}

// The CPU threads of every engine a test starts (-t, kvgate's --threads). One: the suite runs
// tests side by side (ctest -j $(nproc)), and engines whose threads together outnumber the
// cores wait at ggml's spinning barriers for threads that are not running. Two tests of two
// engine threads each on two cores took 110 s each for a 337-token reply that took 2-3 s with
// one thread each (ReplyEndE2eTest.AReplyThatFillsTheContextEndsByLength, both forks at once).
inline constexpr int kEngineThreads = 1;
inline std::string engine_threads() { return std::to_string(kEngineThreads); }

// A gtest parameter name for a fork ("mainline", "ik").
inline std::string fork_param_name(plan::Fork fork) { return plan::fork_name(fork); }

}  // namespace kvgate::testing
