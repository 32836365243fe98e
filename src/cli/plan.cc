// kvgate plan MODEL.gguf [--ctx N] [--ctk T] [--ctv T] [--parallel N] [--ubatch N]
//                        [--memory SIZE] [--reserve SIZE] [--fork mainline|ik] [--server BIN]
//                        [--fit] [--json] ...
//
// The memory bill of serving MODEL with those settings: weights by device, every KV cache,
// recurrent state, compute and output buffers, host prompt cache, checkpoints, reserve;
// against --memory, a verdict. --fit finds the largest context (and with --ctk auto the most
// precise KV type) that fits. Prints the server command line for the plan. Exit codes: 0
// (fits, or no budget given), 1 (does not fit, or the engine would refuse the settings),
// 2 (usage).
#include <cstdio>

#include <fmt/format.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/plan_options.h"
#include "cli/plan_report.h"
#include "plan/fit.h"

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
  if (auto code = parse_args(app, argc, argv)) return *code;

  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "kvgate plan: %s\n", message.c_str());
    return kExitFailure;
  };
  auto resolved = resolve_plan_args(args, app);
  if (!resolved) {
    std::fprintf(stderr, "kvgate plan: %s\n", resolved.error().message().c_str());
    return kExitUsage;
  }
  if (resolved->ctk_auto && !do_fit) {
    std::fprintf(stderr, "kvgate plan: --ctk auto chooses a type only with --fit\n");
    return kExitUsage;
  }
  auto model = load_model(args.model);
  if (!model) return fail(model.error().message());

  plan::ServerSettings settings = resolved->settings;
  plan::MemoryPlan memory;
  std::optional<plan::FitResult> fitted;
  if (do_fit) {
    if (!resolved->budget) {
      std::fprintf(stderr, "kvgate plan: --fit needs --memory SIZE\n");
      return kExitUsage;
    }
    plan::FitRequest req{.budget = *resolved->budget, .auto_type = resolved->ctk_auto};
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

  PlanReport report{.model_path = args.model,
                    .model = &*model,
                    .settings = &settings,
                    .plan = &memory,
                    .budget = resolved->budget,
                    .fit = fitted ? &*fitted : nullptr,
                    .server = args.server.empty() ? "llama-server" : args.server};
  if (as_json) {
    std::printf("%s\n", plan_json(report).dump(2).c_str());
  } else {
    std::fputs(plan_text(report).c_str(), stdout);
  }
  if (resolved->budget && memory.total() > *resolved->budget) return kExitFailure;
  return kExitOk;
}

}  // namespace kvgate::cli
