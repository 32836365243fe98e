#include "engine/verify.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "util/units.h"

namespace kvgate::engine {
namespace {

constexpr double kMibTolerance = 0.0051;  // the log prints two decimals

double mib(uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

uint32_t pad_to(uint32_t n, uint32_t multiple) { return (n + multiple - 1) / multiple * multiple; }

class Report {
 public:
  explicit Report(Comparison& c) : c_(c) {}
  void error(std::string code, std::string message) { add(std::move(code), Severity::kError, std::move(message)); }
  void warning(std::string code, std::string message) {
    add(std::move(code), Severity::kWarning, std::move(message));
  }
  void ok(std::string line) { c_.verified.push_back(std::move(line)); }

 private:
  void add(std::string code, Severity s, std::string message) {
    c_.findings.push_back({std::move(code), s, std::move(message)});
  }
  Comparison& c_;
};

const char* cache_label(plan::CacheRole role) {
  switch (role) {
    case plan::CacheRole::kMain: return "KV cache";
    case plan::CacheRole::kSwa: return "sliding-window KV cache";
    case plan::CacheRole::kIndexer: return "indexer key cache";
  }
  return "KV cache";
}

// The engine's error lines for a message: the first few, joined.
std::string error_summary(const StartupFacts& f) {
  std::string out;
  for (size_t i = 0; i < f.errors.size() && i < 3; ++i) out += (i == 0 ? "" : " | ") + f.errors[i];
  return out.empty() ? "no error line before it (see the log's last lines)" : out;
}

void check_facts_alone(const StartupFacts& f, bool final, Report& r) {
  // A crash is a fact as soon as it is in the log, whatever loaded before it.
  if (f.crashed) {
    r.error("engine_crashed", fmt::format("the engine crashed{}: {}", f.listening ? " after it started listening" : "",
                                          error_summary(f)));
  }
  if (final) {
    if (auto st = require_allocation_facts(f); !st.ok()) r.error("no_allocation_lines", st.error().message());
    if (!f.crashed && !f.errors.empty() && !f.model_loaded && !f.listening) {
      r.error("engine_error",
              fmt::format("the engine reported an error and did not finish loading: {}", error_summary(f)));
    }
  }
  if (f.slot_capped) {
    r.warning("slot_capped_by_training_context",
              fmt::format("each slot is capped at the model's training context: {} tokens requested, {} usable "
                          "(the cells above are allocated but never used; lower -c or raise -np)",
                          f.slot_capped->first, f.slot_capped->second));
  }
}

void check_context(const Expectation& e, const StartupFacts& f, Report& r) {
  if (f.n_ctx) {
    if (*f.n_ctx < e.n_ctx) {
      // Mainline's -fit may shrink the context to fit the device; ik has no -fit (it rejects
      // the flag), so there only -c can be the cause.
      const char* hint = e.fork == plan::Fork::kIk ? "check -c"
                                                   : "check -c, and that -fit did not reduce it: pass -fit off";
      r.error("context_smaller", fmt::format("n_ctx is {}, the plan is {}: the server runs a smaller context than "
                                             "planned ({})",
                                             *f.n_ctx, e.n_ctx, hint));
    } else if (*f.n_ctx > e.n_ctx) {
      r.warning("context_larger", fmt::format("n_ctx is {}, the plan is {}", *f.n_ctx, e.n_ctx));
    } else {
      r.ok(fmt::format("context: n_ctx = {}", *f.n_ctx));
    }
  }
  if (f.n_ctx_seq && e.fork == plan::Fork::kMainline) {
    if (*f.n_ctx_seq < e.n_ctx_seq) {
      r.error("slot_context_smaller",
              fmt::format("n_ctx_seq is {}, the plan is {} per slot", *f.n_ctx_seq, e.n_ctx_seq));
    } else if (*f.n_ctx_seq == e.n_ctx_seq) {
      r.ok(fmt::format("context per slot stream: n_ctx_seq = {}", *f.n_ctx_seq));
    }
  }
  const bool seq_reported = f.n_ctx_seq && e.fork == plan::Fork::kMainline && *f.n_ctx_seq < e.n_ctx_seq;
  if (f.n_ctx_slot && *f.n_ctx_slot < e.n_ctx_slot && !seq_reported) {
    r.error("slot_context_smaller",
            fmt::format("each slot holds {} tokens, the plan is {}", *f.n_ctx_slot, e.n_ctx_slot));
  } else if (f.n_ctx_slot) {
    r.ok(fmt::format("slot context: {} tokens", *f.n_ctx_slot));
  }
  const std::optional<uint32_t> slots = f.n_seq_max ? f.n_seq_max : f.n_slots;
  if (slots && *slots != e.n_seq_max) {
    r.error("slots_mismatch", fmt::format("the server has {} slot(s), the plan {} (pass -np {})", *slots,
                                          e.n_seq_max, e.n_seq_max));
  } else if (slots) {
    r.ok(fmt::format("slots: {}", *slots));
  }
  if (f.kv_unified && e.fork == plan::Fork::kMainline && *f.kv_unified != e.kv_unified) {
    r.error("kv_unified_mismatch", fmt::format("kv_unified is {}, the plan {} (pass {})", *f.kv_unified,
                                               e.kv_unified, e.kv_unified ? "-kvu" : "-no-kvu"));
  }
  if (f.flash_attn && *f.flash_attn != e.flash_attn) {
    r.error("flash_attn_mismatch", fmt::format("flash attention is {}, the plan has it {}",
                                               *f.flash_attn ? "on" : "off", e.flash_attn ? "on" : "off"));
  }
}

void check_types(const Expectation& e, const std::string& k, const std::string& v, std::string_view what,
                 Report& r, bool& ok) {
  if (!k.empty() && !e.type_k.empty() && k != e.type_k) {
    ok = false;
    r.error("kv_type_mismatch", fmt::format("the {} stores K as {}, the plan {} (pass -ctk {})", what, k, e.type_k,
                                            e.type_k));
  }
  if (!v.empty() && !e.type_v.empty() && v != e.type_v) {
    ok = false;
    r.error("kv_type_mismatch", fmt::format("the {} stores V as {}, the plan {} (pass -ctv {})", what, v, e.type_v,
                                            e.type_v));
  }
}

void check_size(std::string_view what, double logged, uint64_t planned_bytes, Report& r, bool& ok) {
  const double planned = mib(planned_bytes);
  if (std::fabs(logged - planned) <= kMibTolerance) return;
  ok = false;
  if (logged < planned) {
    r.error("kv_smaller_than_planned",
            fmt::format("the {} is {:.2f} MiB, the plan {:.2f} MiB", what, logged, planned));
  } else {
    r.error("kv_larger_than_planned", fmt::format("the {} is {:.2f} MiB, the plan {:.2f} MiB", what, logged, planned));
  }
}

void check_mainline_caches(const Expectation& e, const StartupFacts& f, bool final, Report& r) {
  for (const auto& planned : e.caches) {
    const KvCacheFact* got = f.kv_cache(planned.role);
    const char* label = cache_label(planned.role);
    if (!got) {
      if (final) r.error("kv_cache_missing", fmt::format("the log has no {} line; the plan has one", label));
      continue;
    }
    bool ok = true;
    check_types(e, got->type_k, planned.type_v.empty() ? std::string() : got->type_v, label, r, ok);
    if (got->cells < planned.cells) {
      ok = false;
      r.error("fewer_cells", fmt::format("the {} has {} cells per stream, the plan {}", label, got->cells,
                                         planned.cells));
    } else if (got->cells > planned.cells) {
      ok = false;
      r.warning("more_cells", fmt::format("the {} has {} cells per stream, the plan {}", label, got->cells,
                                          planned.cells));
    }
    if (got->layers != planned.layers) {
      ok = false;
      r.error("kv_layers_mismatch",
              fmt::format("the {} covers {} layers, the plan {}", label, got->layers, planned.layers));
    }
    check_size(label, got->mib, planned.bytes(), r, ok);
    if (ok) {
      r.ok(fmt::format("{}: {:.2f} MiB ({} cells, {} layers, {}/{} seqs), K {} / V {} as planned", label, got->mib,
                       got->cells, got->layers, got->seqs, got->streams, got->type_k, got->type_v));
    }
  }
  for (const auto& got : f.kv_caches) {
    const bool planned = std::any_of(e.caches.begin(), e.caches.end(), [&](const auto& c) { return c.role == got.role; });
    if (!planned) {
      r.warning("kv_cache_unexpected", fmt::format("the log has a {} of {:.2f} MiB the plan did not expect",
                                                   cache_label(got.role), got.mib));
    }
  }
}

void check_ik_cache(const Expectation& e, const StartupFacts& f, bool final, Report& r) {
  if (!f.kv_self) {
    if (final && !e.caches.empty()) r.error("kv_cache_missing", "the log has no `KV self size` line");
    return;
  }
  const KvSelfFact& kv = *f.kv_self;
  bool ok = true;
  if (e.ik_mla) {
    if (kv.type_k != e.ik_mla->ckv_type) {
      ok = false;
      r.error("kv_type_mismatch",
              fmt::format("c^KV is stored as {}, the plan {}", kv.type_k, e.ik_mla->ckv_type));
    }
  } else {
    check_types(e, kv.type_k, kv.type_v, "KV cache", r, ok);
  }
  uint64_t planned = 0;
  for (const auto& c : e.caches) planned += c.bytes();
  check_size("KV cache", kv.mib, planned, r, ok);
  if (ok) r.ok(fmt::format("KV self size {:.2f} MiB, K {} / V {} as planned", kv.mib, kv.type_k, kv.type_v));
}

void check_recurrent(const Expectation& e, const StartupFacts& f, bool final, Report& r) {
  if (!e.recurrent) return;
  if (e.fork == plan::Fork::kIk) return;  // ik folds it into the KV buffer without a line of its own
  if (!f.recurrent) {
    if (final) r.error("recurrent_missing", "the log has no llama_memory_recurrent line; the plan has recurrent state");
    return;
  }
  const auto& p = *e.recurrent;
  const auto& g = *f.recurrent;
  const double planned = mib(p.bytes());
  if (g.cells != p.rows || std::fabs(g.mib - planned) > kMibTolerance) {
    r.error("recurrent_mismatch", fmt::format("recurrent state is {:.2f} MiB in {} rows, the plan {:.2f} MiB in {} rows",
                                              g.mib, g.cells, planned, p.rows));
  } else {
    r.ok(fmt::format("recurrent state: {:.2f} MiB ({} rows, R {:.2f} + S {:.2f}) as planned", g.mib, g.cells, g.r_mib,
                     g.s_mib));
  }
}

void check_offload(const Expectation& e, const StartupFacts& f, Report& r) {
  if (!f.offloaded) return;
  const auto [n, m] = *f.offloaded;
  if (n < e.offloaded) {
    r.error("partial_offload", fmt::format("offloaded {}/{} layers to the GPU, the plan {}/{} (the rest runs on the "
                                           "CPU: much slower, and it needs host memory)",
                                           n, m, e.offloaded, e.offloadable));
    return;
  }
  r.ok(fmt::format("offloaded {}/{} layers", n, m));
  if (n == m && e.sizes_known) {
    double host = 0;
    for (const auto& b : f.model_buffers) {
      if (b.device.rfind("CPU", 0) == 0) host += b.mib;
    }
    const double planned = mib(e.weights_host);
    if (host > planned * 1.10 + 64) {
      r.warning("cpu_weights_left",
                fmt::format("all layers are offloaded, yet host model buffers hold {:.2f} MiB (the plan {:.2f} MiB): "
                            "tensor overrides (-ot, --cpu-moe) or the fitter kept weights on the CPU",
                            host, planned));
    }
  }
}

void check_compute(const Expectation& e, const StartupFacts& f, Report& r) {
  if (!e.sizes_known || e.compute_estimate == 0) return;
  for (const auto& b : f.compute_buffers) {
    const double est = mib(e.compute_estimate);
    if (b.mib > est * 1.15 + 1) {
      r.warning("compute_above_estimate",
                fmt::format("{} compute buffer is {:.2f} MiB, the estimate {:.2f} MiB", b.device, b.mib, est));
    }
  }
}

}  // namespace

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kError: return "error";
    case Severity::kWarning: return "warning";
    case Severity::kInfo: return "info";
  }
  return "error";
}

bool Comparison::has_errors() const {
  return std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.severity == Severity::kError; });
}

Expectation expectation_from_plan(const plan::MemoryPlan& p, const plan::ServerSettings& s) {
  Expectation e;
  e.fork = p.fork;
  e.n_ctx = p.n_ctx;
  e.n_ctx_seq = p.n_ctx_seq;
  e.n_ctx_slot = p.n_ctx_slot;
  e.slot_capped = p.slot_capped_by_train;
  e.n_seq_max = p.n_seq_max;
  e.kv_unified = p.kv_unified;
  e.flash_attn = p.flash_attn;
  e.type_k = p.caches.empty() ? s.cache_type_k : p.caches.front().type_k;
  e.type_v = p.caches.empty() ? s.cache_type_v : p.caches.front().type_v;
  e.caches = p.caches;
  e.recurrent = p.recurrent;
  e.ik_mla = p.ik_mla;
  e.offloaded = p.offloaded_layers;
  e.offloadable = p.offloadable_layers;
  e.weights_host = p.weights_host;
  e.compute_estimate = std::max(p.compute_device, p.compute_host);
  return e;
}

Expectation expectation_from_settings(const plan::ServerSettings& s, plan::Fork fork) {
  Expectation e;
  e.fork = fork;
  e.sizes_known = false;
  e.n_seq_max = std::max<uint32_t>(1, s.parallel);
  e.flash_attn = s.flash_attn != plan::FlashAttn::kOff;
  const uint32_t pad = (fork == plan::Fork::kIk && !e.flash_attn) ? 32 : 256;
  e.n_ctx = s.ctx == 0 ? 0 : pad_to(s.ctx, pad);
  e.kv_unified = fork == plan::Fork::kIk || s.kv_unified.value_or(false);
  if (fork == plan::Fork::kMainline && !e.kv_unified) {
    e.n_ctx_seq = pad_to(e.n_ctx / e.n_seq_max, 256);
    e.n_ctx = e.n_ctx_seq * e.n_seq_max;
  } else {
    e.n_ctx_seq = e.n_ctx;
  }
  e.n_ctx_slot = fork == plan::Fork::kIk ? e.n_ctx / e.n_seq_max : e.n_ctx_seq;
  e.type_k = s.cache_type_k;
  e.type_v = s.cache_type_v;
  e.offloaded = s.n_gpu_layers < 0 ? UINT32_MAX : static_cast<uint32_t>(s.n_gpu_layers);
  return e;
}

Comparison inspect_facts(const StartupFacts& f, bool final) {
  Comparison c;
  Report r(c);
  check_facts_alone(f, final, r);
  if (f.offloaded && f.offloaded->first < f.offloaded->second) {
    r.warning("partial_offload", fmt::format("offloaded {}/{} layers to the GPU: the rest runs on the CPU",
                                             f.offloaded->first, f.offloaded->second));
  }
  return c;
}

Comparison compare(const Expectation& e, const StartupFacts& f, bool final) {
  Comparison c;
  Report r(c);
  check_facts_alone(f, final, r);
  if (e.n_ctx > 0) check_context(e, f, r);
  if (e.sizes_known) {
    if (e.fork == plan::Fork::kIk || (f.kv_caches.empty() && f.kv_self)) {
      check_ik_cache(e, f, final, r);
    } else {
      check_mainline_caches(e, f, final, r);
    }
    check_recurrent(e, f, final, r);
  } else {
    bool ok = true;
    for (const auto& kv : f.kv_caches) check_types(e, kv.type_k, kv.type_v, cache_label(kv.role), r, ok);
    if (f.kv_self) check_types(e, f.kv_self->type_k, f.kv_self->type_v, "KV cache", r, ok);
    if (ok && (!f.kv_caches.empty() || f.kv_self)) r.ok(fmt::format("KV types K {} / V {} as requested", e.type_k, e.type_v));
  }
  if (e.offloaded > 0) {
    Expectation bounded = e;
    if (f.offloaded) bounded.offloaded = std::min(e.offloaded, f.offloaded->second);
    if (bounded.offloadable == 0 && f.offloaded) bounded.offloadable = f.offloaded->second;
    check_offload(bounded, f, r);
  }
  check_compute(e, f, r);
  if (e.slot_capped) {
    for (auto& finding : c.findings) {
      if (finding.code == "slot_capped_by_training_context") finding.severity = Severity::kInfo;
    }
  }
  return c;
}

bool StartupVerifier::complete() const {
  const StartupFacts& f = parser_.facts();
  const bool slots = f.n_slots.has_value() || f.listening || f.model_loaded;
  if (!expected_) return slots && f.has_allocation_facts();
  const Expectation& e = *expected_;
  if (!f.n_ctx || f.compute_buffers.empty() || !slots) return false;
  if (!e.sizes_known) return true;
  if (e.fork == plan::Fork::kIk) return f.kv_self.has_value();
  for (const auto& c : e.caches) {
    if (!f.kv_cache(c.role)) return false;
  }
  return !e.recurrent || f.recurrent.has_value();
}

Comparison StartupVerifier::findings() const {
  return expected_ ? compare(*expected_, parser_.facts(), false) : inspect_facts(parser_.facts(), false);
}

Comparison StartupVerifier::finish() const {
  return expected_ ? compare(*expected_, parser_.facts(), true) : inspect_facts(parser_.facts(), true);
}

}  // namespace kvgate::engine
