// The planning options shared by `kvgate plan` and `kvgate doctor`: what the server will be
// (or was) started with, the fork, the budget. They map onto plan::ServerSettings (the
// contract with the launcher) and plan::PlanOptions.
//
//   --ctx N (4096, 32k, 256k; 0 = training context)   --parallel N (1)   --kvu / --no-kvu
//   --ctk T / --ctv T (f16; --ctk auto with --fit)     --ubatch N (512)   --batch N (2048)
//   --flash-attn on|off|auto (auto)  --ngl N|all (all) --no-gpu (CPU-only build)
//   --swa-full  --cache-ram SIZE (8192 MiB; 0 = off)   --ctx-checkpoints N (32)  --mla 0..3 (ik)
//   --memory SIZE (budget)  --reserve SIZE (1 GiB)     --fork mainline|ik  --server BIN
//   --weights RECIPE (plan the weights at Q3_K_M, IQ2_M, …: plan/quant_recipe.h)  --no-imatrix
//   --unified-memory (the budget is one GPU+host pool: host caches sized from it)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "plan/memory_model.h"
#include "plan/model_desc.h"
#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::cli {

struct PlanArgs {
  std::string model;
  std::string ctx = "4096";
  uint32_t parallel = 1;
  std::optional<bool> kv_unified;
  std::string ctk = "f16";
  std::string ctv;  // empty: follow --ctk
  uint32_t ubatch = 512;
  uint32_t batch = 2048;
  std::string flash_attn = "auto";
  std::string ngl = "all";
  bool no_gpu = false;
  bool swa_full = false;
  std::string cache_ram;      // empty: the engine's default (8192 MiB)
  std::optional<uint32_t> ctx_checkpoints;
  std::optional<uint32_t> ctx_checkpoint_tolerance;
  std::optional<int32_t> mla;
  std::string memory;         // empty: no budget
  std::string reserve = "1GiB";
  std::string fork = "mainline";
  std::string server;         // a llama-server binary (named in the printed command line)
  std::string weights;        // a quantization recipe; empty: the file's own tensor types
  bool no_imatrix = false;    // the recipe is quantized without an importance matrix
  bool unified_memory = false;
};

// Registers the options on `app`. With `model_positional` the model is the first positional
// argument (plan); otherwise it is --model/-m and optional (doctor).
void add_plan_options(CLI::App& app, PlanArgs& args, bool model_positional);

struct ResolvedPlanArgs {
  plan::ServerSettings settings;
  plan::PlanOptions options;
  std::optional<uint64_t> budget;  // bytes
  bool ctk_auto = false;
  bool ctx_given = false;          // --ctx was set explicitly
  plan::DescribeOptions describe;  // --weights
};

// Checks and converts the options; errors name the option.
Result<ResolvedPlanArgs> resolve_plan_args(const PlanArgs& args, const CLI::App& app);

// Opens the model (header only) and describes it (with --weights: at that recipe).
Result<plan::ModelDescriptor> load_model(const std::string& path, const plan::DescribeOptions& describe = {});

}  // namespace kvgate::cli
