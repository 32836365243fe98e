// kvgate doctor [--log FILE [--model MODEL.gguf] [plan options]] [--device-root DIR]
//               [--nvidia-smi-output FILE] [--json]
//
// First the device report (device/facts.h): the board or GPU, power mode, clocks,
// temperatures and memory, each ok or warn, and the memory budget they imply; warnings never
// fail the command. Without --log that is all (exit 0). --device-root reads a copied tree
// (tests/fixtures/device/) instead of `/`, and --nvidia-smi-output takes the query's text from
// a file instead of running nvidia-smi.
//
// With --log it then reads a llama-server startup log (mainline at -lv 4, or ik_llama.cpp), states what the
// server really allocated and, given the plan options (and the model, for sizes), compares
// it with the plan: every difference is a named finding (engine/verify.h). With --model,
// server settings that are not given are taken from the log itself, so the sizes the engine
// allocated for them are still checked. Exit codes: 0 no
// error finding, 1 an error finding (or the log has no allocation lines / cannot be read),
// 2 usage. A log of a start that failed (the engine crashed, or printed errors and did not
// load) says so in its verdict, with the engine's own error lines in the finding.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/plan_options.h"
#include "cli/plan_report.h"
#include "device/facts.h"
#include "engine/verify.h"
#include "util/json.h"

namespace kvgate::cli {
namespace {

using json = nlohmann::ordered_json;

json buffers_json(const std::vector<engine::BufferFact>& buffers) {
  json out = json::array();
  for (const auto& b : buffers) out.push_back({{"device", b.device}, {"mib", b.mib}});
  return out;
}

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json facts_json(const engine::StartupFacts& f) {
  json j;
  j["fork"] = f.fork ? json(plan::fork_name(*f.fork)) : json(nullptr);
  j["verbosity"] = opt(f.verbosity);
  j["n_ctx_train"] = opt(f.n_ctx_train);
  j["n_seq_max"] = opt(f.n_seq_max);
  j["n_ctx"] = opt(f.n_ctx);
  j["n_ctx_seq"] = opt(f.n_ctx_seq);
  j["n_batch"] = opt(f.n_batch);
  j["n_ubatch"] = opt(f.n_ubatch);
  j["flash_attn"] = opt(f.flash_attn);
  j["kv_unified"] = opt(f.kv_unified);
  j["mla_attn"] = opt(f.mla_attn);
  j["n_slots"] = opt(f.n_slots);
  j["n_ctx_slot"] = opt(f.n_ctx_slot);
  j["slot_capped"] = f.slot_capped ? json({{"requested", f.slot_capped->first}, {"n_ctx_train", f.slot_capped->second}})
                                   : json(nullptr);
  j["ctx_seq_over_train"] = f.ctx_seq_over_train ? json({f.ctx_seq_over_train->first, f.ctx_seq_over_train->second})
                                                 : json(nullptr);
  json caches = json::array();
  for (const auto& c : f.kv_caches) {
    caches.push_back({{"role", plan::cache_role_name(c.role)},
                      {"mib", c.mib},
                      {"cells", c.cells},
                      {"layers", c.layers},
                      {"seqs", c.seqs},
                      {"streams", c.streams},
                      {"type_k", c.type_k},
                      {"k_mib", c.k_mib},
                      {"type_v", c.type_v},
                      {"v_mib", c.v_mib},
                      {"line", c.line}});
  }
  j["kv_caches"] = caches;
  j["kv_buffers"] = buffers_json(f.kv_buffers);
  if (f.kv_self) {
    j["kv_self"] = {{"mib", f.kv_self->mib},       {"mla", f.kv_self->mla},     {"type_k", f.kv_self->type_k},
                    {"k_mib", f.kv_self->k_mib},   {"type_v", f.kv_self->type_v}, {"v_mib", f.kv_self->v_mib}};
  } else {
    j["kv_self"] = nullptr;
  }
  if (f.recurrent) {
    const auto& r = *f.recurrent;
    j["recurrent"] = {{"mib", r.mib},       {"cells", r.cells},   {"layers", r.layers}, {"seqs", r.seqs},
                      {"rs_seq", r.rs_seq}, {"r_mib", r.r_mib},   {"s_mib", r.s_mib},   {"p_mib", r.p_mib}};
  } else {
    j["recurrent"] = nullptr;
  }
  j["rs_buffers"] = buffers_json(f.rs_buffers);
  j["offloaded"] = f.offloaded ? json({{"layers", f.offloaded->first}, {"of", f.offloaded->second}}) : json(nullptr);
  j["model_buffers"] = buffers_json(f.model_buffers);
  j["output_buffers"] = buffers_json(f.output_buffers);
  j["compute_buffers"] = buffers_json(f.compute_buffers);
  j["errors"] = f.errors;
  j["model_loaded"] = f.model_loaded;
  j["listening"] = f.listening;
  j["lines"] = f.lines;
  j["recognised"] = f.recognised;
  return j;
}

std::string buffers_text(const std::vector<engine::BufferFact>& buffers) {
  std::string out;
  for (const auto& b : buffers) out += fmt::format("{}{} {:.2f} MiB", out.empty() ? "" : ", ", b.device, b.mib);
  return out.empty() ? "-" : out;
}

std::string facts_text(const engine::StartupFacts& f) {
  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  if (f.n_ctx) {
    line(fmt::format("context    n_ctx {}{}{}{}", *f.n_ctx,
                     f.n_ctx_seq ? fmt::format(", n_ctx_seq {}", *f.n_ctx_seq) : "",
                     f.n_seq_max ? fmt::format(", {} sequence(s)", *f.n_seq_max) : "",
                     f.kv_unified ? (*f.kv_unified ? ", unified KV" : ", per-slot KV") : ""));
  }
  if (f.flash_attn) line(fmt::format("flash attn {}", *f.flash_attn ? "on" : "off"));
  for (const auto& c : f.kv_caches) {
    line(fmt::format("{:<10} {:.2f} MiB ({} cells, {} layers, {}/{} seqs), K ({}) {:.2f} MiB, V ({}) {:.2f} MiB",
                     plan::cache_role_name(c.role), c.mib, c.cells, c.layers, c.seqs, c.streams, c.type_k, c.k_mib,
                     c.type_v, c.v_mib));
  }
  if (f.kv_self) {
    line(fmt::format("KV self    {:.2f} MiB, {} ({}) {:.2f} MiB, {}", f.kv_self->mib, f.kv_self->mla ? "c^KV" : "K",
                     f.kv_self->type_k, f.kv_self->k_mib,
                     f.kv_self->type_v.empty() ? std::string("no V cache")
                                               : fmt::format("V ({}) {:.2f} MiB", f.kv_self->type_v, f.kv_self->v_mib)));
  }
  if (f.recurrent) {
    line(fmt::format("recurrent  {:.2f} MiB ({} rows, {} layers), R {:.2f} MiB, S {:.2f} MiB", f.recurrent->mib,
                     f.recurrent->cells, f.recurrent->layers, f.recurrent->r_mib, f.recurrent->s_mib));
  }
  if (f.offloaded) line(fmt::format("offloaded  {}/{} layers to the GPU", f.offloaded->first, f.offloaded->second));
  if (!f.model_buffers.empty()) line("weights    " + buffers_text(f.model_buffers));
  if (!f.kv_buffers.empty()) line("KV buffers " + buffers_text(f.kv_buffers));
  if (!f.compute_buffers.empty()) line("compute    " + buffers_text(f.compute_buffers));
  if (!f.output_buffers.empty()) line("output     " + buffers_text(f.output_buffers));
  if (f.n_slots || f.n_ctx_slot) {
    line(fmt::format("slots      {} × {} tokens", f.n_slots ? std::to_string(*f.n_slots) : "?",
                     f.n_ctx_slot ? std::to_string(*f.n_ctx_slot) : "?"));
  }
  return out;
}

// With a model but without some server settings, take those settings from the log, so the
// comparison checks what the engine allocated for them (sizes, cells, layers, state) rather
// than reporting the missing options as mismatches. Returns the options taken.
std::vector<std::string> settings_from_log(const engine::StartupFacts& f, const CLI::App& app, PlanArgs& a) {
  std::vector<std::string> taken;
  auto unset = [&app](const char* opt) { return app.count(opt) == 0; };
  if (unset("--ctx") && f.n_ctx) {
    a.ctx = std::to_string(*f.n_ctx);
    taken.push_back("--ctx " + a.ctx);
  }
  const std::optional<uint32_t> slots = f.n_seq_max ? f.n_seq_max : f.n_slots;
  if (unset("--parallel") && slots) {
    a.parallel = *slots;
    taken.push_back("--np " + std::to_string(*slots));
  }
  if (unset("--kvu") && unset("--no-kvu") && f.kv_unified && f.fork != plan::Fork::kIk) {
    a.kv_unified = *f.kv_unified;
    taken.push_back(*f.kv_unified ? "--kvu" : "--no-kvu");
  }
  std::string k, v;
  if (!f.kv_caches.empty()) {
    k = f.kv_caches.front().type_k;
    v = f.kv_caches.front().type_v;
  } else if (f.kv_self) {
    k = f.kv_self->type_k;
    v = f.kv_self->type_v;
  }
  if (unset("--ctk") && !k.empty()) {
    a.ctk = k;
    taken.push_back("--ctk " + k);
  }
  if (unset("--ctv") && unset("--ctk") && (!v.empty() || !k.empty())) {
    a.ctv = v.empty() ? a.ctk : v;
    taken.push_back("--ctv " + a.ctv);
  }
  if (unset("--ubatch") && f.n_ubatch) {
    a.ubatch = *f.n_ubatch;
    taken.push_back("--ubatch " + std::to_string(*f.n_ubatch));
  }
  if (unset("--batch") && f.n_batch) a.batch = *f.n_batch;
  if (unset("--flash-attn") && f.flash_attn) {
    a.flash_attn = *f.flash_attn ? "on" : "off";
    taken.push_back("--flash-attn " + a.flash_attn);
  }
  // -ngl stays "all" unless given: a partial offload is exactly what doctor must report. A
  // build without GPU offload prints no offload line at all; plan it as one.
  if (unset("--ngl") && unset("--no-gpu") && !f.offloaded && f.has_allocation_facts()) {
    a.no_gpu = true;
    taken.push_back("--no-gpu");
  }
  if (unset("--mla") && f.mla_attn && f.fork == plan::Fork::kIk) a.mla = *f.mla_attn;
  return taken;
}

// The finding that says the start itself failed (the engine crashed or did not load), if any.
const engine::Finding* start_failure(const engine::Comparison& c) {
  for (const auto& f : c.findings) {
    if (f.code == "engine_crashed" || f.code == "engine_error") return &f;
  }
  return nullptr;
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("cannot read {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json device_json(const device::Facts& f) {
  json j;
  j["summary"] = f.summary();
  j["arch"] = f.arch;
  j["mem_total"] = f.mem_total;
  j["mem_available"] = f.mem_available;
  j["unified_memory"] = f.unified_memory;
  j["cuda_arch"] = f.cuda_arch();
  j["default_budget"] = opt(f.default_budget());
  if (f.jetson) {
    const device::Jetson& t = *f.jetson;
    j["jetson"] = {{"model", t.model},
                   {"soc", t.soc},
                   {"compatible", t.compatible},
                   {"l4t", t.l4t_version},
                   {"jetpack", t.jetpack},
                   {"power_mode", opt(t.power_mode)},
                   {"power_mode_id", opt(t.power_mode_id)},
                   {"max_power_mode", opt(t.max_power_mode)},
                   {"clocks_locked", opt(t.clocks_locked)},
                   {"cpus_online", t.cpus_online},
                   {"cpu_hz", t.cpu_freq_cur},
                   {"cpu_max_hz", t.cpu_freq_max},
                   {"emc_hz", t.emc_freq_cur},
                   {"emc_max_hz", t.emc_freq_max},
                   {"temp_max_c", t.temp_max_c},
                   {"temp_max_zone", t.temp_max_zone},
                   {"temp_throttle_c", t.temp_throttle_c}};
  } else {
    j["jetson"] = nullptr;
  }
  json gpus = json::array();
  for (const auto& g : f.gpus) {
    gpus.push_back({{"name", g.name},
                    {"compute_capability", g.compute_capability},
                    {"memory_total", g.memory_total},
                    {"memory_free", g.memory_free},
                    {"freq_hz", g.freq_cur},
                    {"freq_max_hz", g.freq_max}});
  }
  j["gpus"] = gpus;
  json checks = json::array();
  for (const auto& c : f.checks) {
    checks.push_back({{"name", c.name}, {"level", device::level_name(c.level)}, {"detail", c.detail}});
  }
  j["checks"] = checks;
  j["notes"] = f.notes;
  return j;
}

// The device facts: the local machine, or the tree and nvidia-smi text given.
Result<device::Facts> device_facts(const std::string& root, const std::string& smi_path) {
  if (root.empty() && smi_path.empty()) return device::read_local_facts();
  std::optional<std::string> smi;
  if (!smi_path.empty()) {
    KV_ASSIGN_OR_RETURN(smi, read_file(smi_path));
  }
  return device::read_facts(root.empty() ? "/" : root, smi);
}

// `kvgate doctor` without --log: the device report (warnings never fail it).
int report_device_only(const device::Facts& dev, bool as_json) {
  if (as_json) {
    json j;
    j["kvgate"] = "doctor";
    j["schema"] = 1;
    j["device"] = device_json(dev);
    std::printf("%s\n", util::json_text(j, 2).c_str());
  } else {
    std::fputs(device::format_report(dev).c_str(), stdout);
  }
  return kExitOk;
}

// The text report of a log: its facts, what was taken from it, what matched and what did not.
void print_comparison(const std::string& log_path, const engine::StartupFacts& facts,
                      const std::vector<std::string>& from_log, const std::string& source,
                      const engine::Comparison& result) {
  std::printf("log        %s (%s, %zu lines, %zu recognised)\n", log_path.c_str(),
              facts.fork ? (*facts.fork == plan::Fork::kIk ? "ik_llama.cpp" : "mainline llama-server")
                         : "fork not recognised",
              facts.lines, facts.recognised);
  std::fputs(facts_text(facts).c_str(), stdout);
  if (!from_log.empty()) {
    std::string taken;
    for (const auto& t : from_log) taken += (taken.empty() ? "" : " ") + t;
    std::printf("\n(settings not given, taken from the log: %s)\n", taken.c_str());
  }
  if (source == "none") {
    std::printf("\n(no plan options given: only the log's own warnings are checked; add --model and the server's "
                "settings to compare)\n");
  }
  if (!result.verified.empty()) {
    std::printf("\nas planned\n");
    for (const auto& v : result.verified) std::printf("  ok     %s\n", v.c_str());
  }
  if (!result.findings.empty()) {
    std::printf("\nfindings\n");
    for (const auto& f : result.findings) {
      std::printf("  %-7s %s: %s\n", engine::severity_name(f.severity), f.code.c_str(), f.message.c_str());
    }
  }
}

}  // namespace

int run_doctor(int argc, char** argv) {
  CLI::App app{"Check the device (Jetson power mode, clocks, temperatures, memory; NVIDIA GPUs; "
               "CPU-only) and, with --log, read a llama-server startup log (mainline at -lv 4, or "
               "ik_llama.cpp), state what was allocated, and compare it with the plan (exit 1 on any "
               "mismatch).",
               "kvgate doctor"};
  std::string log_path;
  std::string device_root;
  std::string smi_path;
  bool as_json = false;
  PlanArgs args;
  app.add_option("--log", log_path,
                 "the server's startup log (stderr and stdout); without it only the device is checked");
  add_plan_options(app, args, /*model_positional=*/false);
  app.add_option("--device-root", device_root, "read sysfs/procfs/etc under DIR instead of / (fixture trees)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--nvidia-smi-output", smi_path,
                 "nvidia-smi --query-gpu output to use instead of running it");
  app.add_flag("--json", as_json, "facts, plan, findings as JSON (schema: docs/PLANNING.md)");
  if (auto code = parse_args(app, argc, argv)) return *code;

  auto dev = device_facts(device_root, smi_path);
  if (!dev) {
    std::fprintf(stderr, "kvgate doctor: %s\n", dev.error().message().c_str());
    return kExitFailure;
  }
  if (log_path.empty()) return report_device_only(*dev, as_json);
  if (!as_json) std::printf("%s\n", device::format_report(*dev).c_str());

  auto text = read_file(log_path);
  if (!text) {
    std::fprintf(stderr, "kvgate doctor: %s\n", text.error().message().c_str());
    return kExitFailure;
  }
  const engine::StartupFacts facts = engine::parse_startup_log(*text);

  // The fork: as given, else as the log shows.
  if (app.count("--fork") == 0 && facts.fork) args.fork = *facts.fork == plan::Fork::kIk ? "ik" : "mainline";
  bool settings_given = false;
  for (const char* opt : {"--ctx", "--ctk", "--ctv", "--parallel", "--kvu", "--no-kvu", "--ngl", "--flash-attn", "--ubatch"}) {
    settings_given = settings_given || app.count(opt) > 0;
  }
  std::vector<std::string> from_log;
  if (!args.model.empty()) from_log = settings_from_log(facts, app, args);
  auto resolved = resolve_plan_args(args, app);
  if (!resolved) {
    std::fprintf(stderr, "kvgate doctor: %s\n", resolved.error().message().c_str());
    return kExitUsage;
  }

  std::optional<plan::ModelDescriptor> model;
  std::optional<plan::MemoryPlan> memory;
  std::optional<engine::Expectation> expected;
  std::string source = "none";
  if (!args.model.empty()) {
    auto m = load_model(args.model);
    if (!m) {
      std::fprintf(stderr, "kvgate doctor: %s\n", m.error().message().c_str());
      return kExitFailure;
    }
    model = std::move(*m);
    auto p = plan::plan_memory(*model, resolved->settings, resolved->options);
    if (!p) {
      std::fprintf(stderr, "kvgate doctor: the plan itself fails: %s\n", p.error().message().c_str());
      return kExitFailure;
    }
    memory = std::move(*p);
    expected = engine::expectation_from_plan(*memory, resolved->settings);
    source = "plan";
  } else if (settings_given) {
    expected = engine::expectation_from_settings(resolved->settings, resolved->options.fork);
    source = "settings";
  }
  const engine::Comparison result = expected ? engine::compare(*expected, facts, true) : engine::inspect_facts(facts, true);

  if (as_json) {
    json j;
    j["kvgate"] = "doctor";
    j["schema"] = 1;
    j["log"] = log_path;
    j["facts"] = facts_json(facts);
    j["compared_with"] = source;
    j["settings_from_log"] = from_log;
    if (memory) {
      PlanReport report{.model_path = args.model, .model = &*model, .settings = &resolved->settings, .plan = &*memory,
                        .budget = resolved->budget};
      j["plan"] = plan_json(report);
    } else {
      j["plan"] = nullptr;
    }
    json findings = json::array();
    for (const auto& f : result.findings) {
      findings.push_back({{"code", f.code}, {"severity", engine::severity_name(f.severity)}, {"message", f.message}});
    }
    j["findings"] = findings;
    j["verified"] = result.verified;
    j["ok"] = !result.has_errors();
    j["device"] = device_json(*dev);
    std::printf("%s\n", util::json_text(j, 2).c_str());
    return result.has_errors() ? kExitFailure : kExitOk;
  }

  print_comparison(log_path, facts, from_log, source, result);
  const engine::Finding* failed = start_failure(result);
  const char* verdict = failed && failed->code == "engine_crashed" ? "result: the start failed: the engine crashed"
                        : failed                                   ? "result: the start failed: the engine did not load"
                        : !result.has_errors()                     ? "result: ok"
                        : source == "none"                         ? "result: the log shows a problem"
                                                                   : "result: the server does NOT run as planned";
  std::printf("\n%s\n", verdict);
  return result.has_errors() ? kExitFailure : kExitOk;
}

}  // namespace kvgate::cli
