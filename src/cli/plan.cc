// kvgate plan MODEL.gguf [--ctx N] [--ctk T] [--ctv T] [--parallel N] [--ubatch N]
//                        [--memory SIZE] [--reserve SIZE] [--fork mainline|ik] [--server BIN]
//                        [--fit] [--json] ...
//
// With --server BIN the build is probed (engine/probe.h): its fork is used, a build without
// GPU support plans everything on the host, and the command line is the build's own spelling
// of the plan (plan::launch_args), with only flags it accepts.
// The memory bill of serving MODEL with those settings: weights by device, every KV cache,
// recurrent state, compute and output buffers, host prompt cache, checkpoints, reserve;
// against --memory, a verdict. --weights RECIPE plans the weights at another quant (any GGUF
// of the model, metadata-only included); --unified-memory sizes the host caches from the
// budget. --fit finds the largest context (and with --ctk auto the most
// precise KV type) that fits. Prints the server command line for the plan. Exit codes: 0
// (fits, or no budget given), 1 (does not fit, or the engine would refuse the settings),
// 2 (usage).
#include <cstdio>

#include <fmt/format.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/plan_options.h"
#include "cli/plan_report.h"
#include "engine/probe.h"
#include "plan/fit.h"
#include "plan/engine_quirks.h"
#include "plan/launch_args.h"
#include "plan/server_caps.h"
#include "util/json.h"
#include "util/units.h"

namespace kvgate::cli {

int run_plan(int argc, char** argv) {
  CLI::App app{"Plan the memory of a llama-server (mainline or ik_llama.cpp) serving a GGUF model: weights, KV "
               "caches, recurrent state, compute, host caches, against a budget.",
               "kvgate plan"};
  PlanArgs args;
  bool do_fit = false;
  bool as_json = false;
  add_plan_options(app, args, /*model_positional=*/true);
  app.add_flag("--fit", do_fit, "find the largest context (and with --ctk auto the best KV type) within --memory");
  app.add_flag("--json", as_json, "every figure as JSON (schema: docs/PLANNING.md)");
  std::string kv_disk;
  app.add_option("--kv-disk", kv_disk, "disk for saved conversation states (as kvgate up): how many full slots it holds");
  if (auto code = parse_args(app, argc, argv)) return *code;

  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "kvgate plan: %s\n", message.c_str());
    return kExitFailure;
  };
  // --server: the build itself decides the fork, whether -ngl can offload, and the spelling.
  std::optional<plan::ServerCaps> caps;
  if (!args.server.empty()) {
    auto probed = engine::probe_server(args.server);
    if (!probed) return fail(probed.error().message());
    caps = probed->caps;
    const std::string fork = caps->fork == plan::Fork::kIk ? "ik" : "mainline";
    if (app.count("--fork") > 0 && args.fork != fork && !(args.fork == "ik_llama.cpp" && fork == "ik")) {
      std::fprintf(stderr, "kvgate plan: --fork %s, but %s is %s\n", args.fork.c_str(), args.server.c_str(),
                   caps->describe().c_str());
      return kExitUsage;
    }
    args.fork = fork;
    if (!caps->gpu_offload) args.no_gpu = true;
  }
  auto resolved = resolve_plan_args(args, app);
  if (!resolved) {
    std::fprintf(stderr, "kvgate plan: %s\n", resolved.error().message().c_str());
    return kExitUsage;
  }
  if (resolved->ctk_auto && !do_fit) {
    std::fprintf(stderr, "kvgate plan: --ctk auto chooses a type only with --fit\n");
    return kExitUsage;
  }
  auto model = load_model(args.model, resolved->describe);
  if (!model) return fail(model.error().message());

  plan::ServerSettings settings = resolved->settings;
  plan::MemoryPlan memory;
  std::optional<plan::FitResult> fitted;
  if (do_fit) {
    if (!resolved->budget) {
      std::fprintf(stderr, "kvgate plan: --fit needs --memory SIZE\n");
      return kExitUsage;
    }
    plan::FitRequest req{
        .budget = *resolved->budget, .auto_type = resolved->ctk_auto, .caps = caps ? &*caps : nullptr};
    if (resolved->ctx_given && settings.ctx > 0) req.target_ctx = settings.ctx;
    auto f = plan::fit(*model, settings, resolved->options, req);
    if (!f) return fail(f.error().message());
    fitted = std::move(*f);
    settings = fitted->settings;
    memory = fitted->plan;
  } else {
    auto p = plan::plan_memory(*model, settings, resolved->options);
    if (!p) return fail(p.error().message());
    memory = std::move(*p);
  }
  // What the unified-memory rule chose is passed to the server explicitly.
  settings = plan::with_sized_defaults(settings, memory);

  std::optional<uint64_t> kv_disk_bytes;
  if (!kv_disk.empty()) {
    auto b = util::parse_bytes(kv_disk);
    if (!b) return fail("--kv-disk: " + b.error().message());
    kv_disk_bytes = *b;
  }
  PlanReport report{.model_path = args.model,
                    .model = &*model,
                    .settings = &settings,
                    .plan = &memory,
                    .budget = resolved->budget,
                    .kv_disk = kv_disk_bytes,
                    .fit = fitted ? &*fitted : nullptr,
                    .server = args.server.empty() ? "llama-server" : args.server};
  std::string command_error;
  if (caps) {
    plan::choose_fork_settings(*caps, memory.recurrent.has_value(), settings);
    plan::ServerSettings launch = settings;
    launch.model_path = args.model;
    auto argv_or = plan::launch_args(launch, *caps);
    if (argv_or) {
      report.command = {args.server};
      report.command.insert(report.command.end(), argv_or->begin(), argv_or->end());
    } else {
      command_error = argv_or.error().message();
    }
  }
  if (as_json) {
    std::printf("%s\n", util::json_text(plan_json(report), 2).c_str());
  } else {
    std::fputs(plan_text(report).c_str(), stdout);
  }
  if (!command_error.empty()) return fail(fmt::format("{} cannot be started with this plan: {}", args.server, command_error));
  if (resolved->budget && memory.total() > *resolved->budget) return kExitFailure;
  return kExitOk;
}

}  // namespace kvgate::cli
