#include "cli/command.h"

namespace kvgate::cli {

std::span<const Command> commands() {
  static constexpr Command kCommands[] = {
      {"inspect", "GGUF metadata, architecture, layer kinds, tensor sizes", run_inspect},
      {"plan", "memory plan (weights, KV, recurrent state, compute) against a budget", run_plan},
      {"doctor", "verify a server startup log against the plan", run_doctor},
      {"up", "plan, launch and verify the engine, serve the gateway", run_up},
      {"serve", "the gateway in front of a llama-server kvgate did not start", run_serve},
      {"run", "start an agent CLI (claude, codex, opencode, qwen) pointed at a running kvgate", run_run},
      {"bench", "prefill curve, trace replay, gateway overhead", run_bench},
      {"synth", "write GGUF models with random weights for tests and demos", run_synth},
      {"unit", "service files (systemd, supervisor)", run_unit},
      {"engine", "build llama-server (mainline or ik_llama.cpp) for this device", run_engine},
  };
  return kCommands;
}

}  // namespace kvgate::cli
