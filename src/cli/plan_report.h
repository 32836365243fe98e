// How `kvgate plan` (and `kvgate doctor`) present a memory plan: the JSON document with every
// figure (schema in docs/PLANNING.md), the readable table, and the server command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/fit.h"
#include "plan/memory_model.h"
#include "plan/model_desc.h"
#include "plan/server_settings.h"

namespace kvgate::cli {

struct PlanReport {
  std::string model_path;
  const plan::ModelDescriptor* model = nullptr;
  const plan::ServerSettings* settings = nullptr;
  const plan::MemoryPlan* plan = nullptr;
  std::optional<uint64_t> budget;
  std::optional<uint64_t> kv_disk;  // disk for saved conversation states (--kv-disk)
  const plan::FitResult* fit = nullptr;  // when --fit ran
  std::string server = "llama-server";   // binary named in the command line
  // The command for a probed build (plan::launch_args); empty: the plain spelling.
  std::vector<std::string> command;
};

// MiB with two decimals as the engines print them (float division, then %.2f).
double engine_mib(uint64_t bytes);

// The server command line for the planned settings, in the fork's plain spelling (-c, -np,
// -ctk, -ctv, -ub, -ngl, -fa, …). The launcher's probed mapping (plan/launch_args.h)
// supersedes this for a concrete build.
std::vector<std::string> plain_server_command(const plan::ServerSettings& settings, plan::Fork fork,
                                              const std::string& binary, const std::string& model_path);

nlohmann::ordered_json plan_json(const PlanReport& report);
std::string plan_text(const PlanReport& report);

}  // namespace kvgate::cli
