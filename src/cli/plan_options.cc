#include "cli/plan_options.h"

#include <charconv>

#include <fmt/format.h>

#include "gguf/file.h"
#include "plan/kv_type.h"
#include "util/units.h"

namespace kvgate::cli {
namespace {

Result<plan::Fork> parse_fork(std::string_view s) {
  if (s == "mainline" || s == "llama.cpp") return plan::Fork::kMainline;
  if (s == "ik" || s == "ik_llama.cpp" || s == "ik_llama") return plan::Fork::kIk;
  return Error(fmt::format("--fork '{}': use mainline or ik", s));
}

Result<plan::FlashAttn> parse_fa(std::string_view s) {
  if (s == "auto" || s == "-1") return plan::FlashAttn::kAuto;
  if (s == "on" || s == "1" || s == "enabled") return plan::FlashAttn::kOn;
  if (s == "off" || s == "0" || s == "disabled") return plan::FlashAttn::kOff;
  return Error(fmt::format("--flash-attn '{}': use on, off or auto", s));
}

Result<int32_t> parse_ngl(std::string_view s) {
  if (s == "all" || s == "-1") return -1;
  int32_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) {
    return Error(fmt::format("--ngl '{}': a number of layers, or all", s));
  }
  return v;
}

}  // namespace

void add_plan_options(CLI::App& app, PlanArgs& a, bool model_positional) {
  if (model_positional) {
    app.add_option("model", a.model, "GGUF model file (the header is enough: --metadata-only files work)")->required();
  } else {
    app.add_option("--model,-m", a.model, "GGUF model the server ran (enables the full memory comparison)");
  }
  app.add_option("--ctx,-c", a.ctx, "context (-c): 4096, 32k, 256k; 0 = the training context")->capture_default_str();
  app.add_option("--parallel,--np", a.parallel, "slots (-np)")->capture_default_str();
  app.add_flag_function("--kvu,--kv-unified", [&a](int64_t) { a.kv_unified = true; },
                        "one KV pool shared by all slots (mainline -kvu; default: per-slot)");
  app.add_flag_function("--no-kvu,--no-kv-unified", [&a](int64_t) { a.kv_unified = false; },
                        "a KV stream per slot (mainline -no-kvu)");
  app.add_option("--ctk", a.ctk, "K cache type (f16, q8_0, q4_0, …; ik also q6_0, q8_KV; auto with --fit)")
      ->capture_default_str();
  app.add_option("--ctv", a.ctv, "V cache type (default: the K type; quantized V needs flash attention)");
  app.add_option("--ubatch,--ub", a.ubatch, "physical batch (-ub)")->capture_default_str();
  app.add_option("--batch", a.batch, "logical batch (-b)")->capture_default_str();
  app.add_option("--flash-attn,--fa", a.flash_attn, "on, off or auto")->capture_default_str();
  app.add_option("--ngl", a.ngl, "layers on the GPU (-ngl): a number or all")->capture_default_str();
  app.add_flag("--no-gpu", a.no_gpu, "plan for a CPU-only build (everything in host memory)");
  app.add_flag("--swa-full", a.swa_full, "full-size sliding-window cache (mainline --swa-full)");
  app.add_option("--cache-ram", a.cache_ram, "host prompt cache limit (-cram; default 8192 MiB, 0 disables)");
  app.add_option("--ctx-checkpoints", a.ctx_checkpoints, "context checkpoints per slot (default 32)");
  app.add_option("--ctx-checkpoint-tolerance", a.ctx_checkpoint_tolerance,
                 "ik -ctx-ckpt-t N (with --server: chosen for hybrid/recurrent models on ik)");
  app.add_option("--mla", a.mla, "ik_llama.cpp MLA mode 0-3 (default 3)");
  app.add_option("--memory", a.memory, "memory budget for everything (e.g. 32GiB, 24000MiB)");
  app.add_option("--reserve", a.reserve, "kept free for the OS and driver")->capture_default_str();
  app.add_option("--fork", a.fork, "mainline or ik")->capture_default_str();
  app.add_option("--server", a.server, "llama-server binary (named in the printed command line)");
  app.add_option("--weights", a.weights,
                 "plan the weights at this llama-quantize recipe (Q4_K_M, Q3_K_M, IQ2_M, Q8_0, …) from any GGUF of "
                 "the model, metadata-only included");
  app.add_flag("--no-imatrix", a.no_imatrix, "with --weights: quantized without an importance matrix");
  app.add_flag("--unified-memory", a.unified_memory,
               "--memory is one pool for GPU and host (Jetson, DGX Spark): size the host prompt cache and "
               "checkpoints from what is left");
}

Result<ResolvedPlanArgs> resolve_plan_args(const PlanArgs& a, const CLI::App& app) {
  ResolvedPlanArgs r;
  KV_ASSIGN_OR_RETURN(r.options.fork, parse_fork(a.fork));
  auto ctx = util::parse_tokens(a.ctx);
  if (!ctx) return std::move(ctx).error().with_context("--ctx");
  if (*ctx > UINT32_MAX) return Error("--ctx: too large");
  r.ctx_given = app.count("--ctx") > 0;
  plan::ServerSettings& s = r.settings;
  s.model_path = a.model;
  s.ctx = static_cast<uint32_t>(*ctx);
  if (a.parallel == 0) return Error("--parallel must be at least 1");
  s.parallel = a.parallel;
  s.kv_unified = a.kv_unified;
  if (r.options.fork == plan::Fork::kIk && s.kv_unified) {
    return Error("--kvu/--no-kvu are mainline flags: ik_llama.cpp always uses one KV pool");
  }
  r.ctk_auto = a.ctk == "auto";
  s.cache_type_k = r.ctk_auto ? "f16" : a.ctk;
  s.cache_type_v = a.ctv.empty() || a.ctv == "auto" ? s.cache_type_k : a.ctv;
  if (!r.ctk_auto) {
    KV_ASSIGN_OR_RETURN(auto k, plan::parse_kv_type(s.cache_type_k, r.options.fork));
    s.cache_type_k = k.name;
  }
  if (!(a.ctv.empty() || a.ctv == "auto")) {
    KV_ASSIGN_OR_RETURN(auto v, plan::parse_kv_type(s.cache_type_v, r.options.fork));
    s.cache_type_v = v.name;
  } else {
    s.cache_type_v = s.cache_type_k;
  }
  if (a.ubatch == 0 || a.batch == 0) return Error("--ubatch and --batch must be at least 1");
  s.ubatch = a.ubatch;
  s.batch = a.batch;
  KV_ASSIGN_OR_RETURN(s.flash_attn, parse_fa(a.flash_attn));
  KV_ASSIGN_OR_RETURN(s.n_gpu_layers, parse_ngl(a.ngl));
  r.options.has_accelerator = !a.no_gpu;
  if (a.no_gpu) s.n_gpu_layers = 0;
  s.swa_full = a.swa_full;
  if (a.swa_full && r.options.fork == plan::Fork::kIk) {
    return Error("--swa-full is a mainline flag (ik_llama.cpp has no separate sliding-window cache)");
  }
  if (!a.cache_ram.empty()) {
    auto bytes = util::parse_bytes(a.cache_ram);
    if (!bytes) return std::move(bytes).error().with_context("--cache-ram");
    s.cache_ram_mib = *bytes / util::kMiB;
  }
  s.ctx_checkpoints = a.ctx_checkpoints;
  s.ctx_checkpoint_tolerance = a.ctx_checkpoint_tolerance;
  if (a.mla) {
    if (r.options.fork != plan::Fork::kIk) return Error("--mla is an ik_llama.cpp option (use --fork ik)");
    if (*a.mla < 0 || *a.mla > 3) return Error("--mla must be 0, 1, 2 or 3");
    s.mla = a.mla;
  }
  if (!a.memory.empty()) {
    auto bytes = util::parse_bytes(a.memory);
    if (!bytes) return std::move(bytes).error().with_context("--memory");
    r.budget = *bytes;
  }
  auto reserve = util::parse_bytes(a.reserve);
  if (!reserve) return std::move(reserve).error().with_context("--reserve");
  r.options.reserve_bytes = *reserve;
  r.options.unified_memory = a.unified_memory;
  if (a.unified_memory && r.budget) r.options.memory_budget = *r.budget;
  if (!a.weights.empty()) {
    r.describe.weights = plan::find_quant_recipe(a.weights);
    if (r.describe.weights == nullptr) {
      std::string names;
      for (auto n : plan::quant_recipe_names()) names += (names.empty() ? "" : ", ") + std::string(n);
      return Error(fmt::format("--weights '{}' is not a llama-quantize recipe ({})", a.weights, names));
    }
  } else if (a.no_imatrix) {
    return Error("--no-imatrix describes a --weights recipe");
  }
  r.describe.recipe.imatrix = !a.no_imatrix;
  return r;
}

Result<plan::ModelDescriptor> load_model(const std::string& path, const plan::DescribeOptions& describe) {
  auto file = gguf::File::open(path);
  if (!file) return std::move(file).error().with_context(path);
  auto desc = plan::describe_model(*file, describe);
  if (!desc) return std::move(desc).error().with_context(path);
  return desc;
}

}  // namespace kvgate::cli
