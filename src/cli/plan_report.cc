#include "cli/plan_report.h"

#include <cmath>

#include <fmt/format.h>

#include "plan/capacity.h"
#include "util/units.h"

namespace kvgate::cli {
namespace {

using json = nlohmann::ordered_json;

const char* fa_name(plan::FlashAttn fa) {
  switch (fa) {
    case plan::FlashAttn::kOn: return "on";
    case plan::FlashAttn::kOff: return "off";
    case plan::FlashAttn::kAuto: return "auto";
  }
  return "auto";
}

std::string mib_text(uint64_t bytes) { return fmt::format("{:.2f}", static_cast<double>(bytes) / 1048576.0); }

std::string quote(const std::string& arg) {
  if (arg.find_first_of(" \t'\"$\\") == std::string::npos && !arg.empty()) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Component {
  std::string name;
  std::string label;
  uint64_t device = 0;
  uint64_t host = 0;
  bool estimate = false;
};

std::vector<Component> components(const plan::MemoryPlan& p) {
  std::vector<Component> out;
  out.push_back({"weights", "weights", p.weights_device, p.weights_host, false});
  for (const auto& c : p.caches) {
    std::string label = c.role == plan::CacheRole::kSwa       ? "sliding-window KV cache"
                         : c.role == plan::CacheRole::kIndexer ? "indexer key cache"
                                                               : "KV cache";
    label += fmt::format(" ({} layers × {} cells{})", c.layers, c.cells,
                         c.streams > 1 ? fmt::format(" × {} slots", c.streams) : "");
    out.push_back({plan::cache_role_name(c.role), label, c.device_bytes, c.bytes() - c.device_bytes, false});
  }
  if (p.recurrent) {
    out.push_back({"recurrent", fmt::format("recurrent state ({} layers × {} rows)", p.recurrent->layers,
                                            p.recurrent->rows),
                   p.recurrent->device_bytes, p.recurrent->bytes() - p.recurrent->device_bytes, false});
  }
  out.push_back({"compute", "compute buffers", p.compute_device, p.compute_host, true});
  out.push_back({"output", "output buffer (logits)", 0, p.output_host, false});
  out.push_back({"prompt_cache", "host prompt cache (--cache-ram limit)", 0, p.prompt_cache_host, false});
  if (p.checkpoints_host > 0) out.push_back({"checkpoints", "context checkpoints (worst case)", 0, p.checkpoints_host, true});
  out.push_back({"reserve", "reserve (OS, driver)", 0, p.reserve, true});
  return out;
}

json cache_json(const plan::CacheBill& c) {
  return {{"role", plan::cache_role_name(c.role)},
          {"cells", c.cells},
          {"streams", c.streams},
          {"seqs", c.seqs},
          {"layers", c.layers},
          {"type_k", c.type_k},
          {"type_v", c.type_v.empty() ? json(nullptr) : json(c.type_v)},
          {"k_bytes", c.k_bytes},
          {"v_bytes", c.v_bytes},
          {"bytes", c.bytes()},
          {"device_bytes", c.device_bytes},
          {"k_mib", engine_mib(c.k_bytes)},
          {"v_mib", engine_mib(c.v_bytes)},
          {"mib", engine_mib(c.bytes())}};
}

// How accurate recipe figures are (docs/PLANNING.md, "Weights at any quant").
constexpr const char* kRecipeAccuracy =
    "the types llama-quantize (llama.cpp 80fb11a) gives each tensor, with the file's shapes: within 0.3% of stock "
    "llama-quantize uploads; uploads that choose their own tensor types differ (bartowski +2-8%, unsloth UD more)";

json weights_json(const plan::ModelDescriptor& m) {
  json types = json::array();
  for (const auto& t : m.weight_types) types.push_back({{"type", t.type}, {"tensors", t.tensors}, {"bytes", t.bytes}});
  const bool recipe = !m.weights_recipe.empty();
  return {{"recipe", recipe ? json(m.weights_recipe) : json(nullptr)},
          {"imatrix", recipe ? json(m.weights_imatrix) : json(nullptr)},
          {"bytes", m.tensor_bytes},
          {"by_type", types},
          {"fallbacks", m.weights_fallbacks},
          {"accuracy", recipe ? json(kRecipeAccuracy) : json("the file's own tensor sizes (exact)")}};
}

std::string gib_text(uint64_t bytes) { return fmt::format("{:.2f}", static_cast<double>(bytes) / (1ULL << 30)); }

std::string weights_line(const plan::ModelDescriptor& m) {
  std::string types;
  size_t shown = 0;
  for (const auto& t : m.weight_types) {
    if (shown++ == 5) {
      types += ", …";
      break;
    }
    types += fmt::format("{}{} {}", types.empty() ? "" : ", ", t.type, gib_text(t.bytes));
  }
  if (m.weights_recipe.empty()) {
    return fmt::format("weights   {} GiB as the file has them ({} GiB)", gib_text(m.tensor_bytes), types);
  }
  return fmt::format("weights   {} GiB at {}{} ({} GiB{}); figures are for that recipe: {}", gib_text(m.tensor_bytes),
                     m.weights_recipe, m.weights_imatrix ? " with an importance matrix" : " without an importance matrix",
                     types, m.weights_fallbacks ? fmt::format("; {} row-length fallbacks", m.weights_fallbacks) : "",
                     kRecipeAccuracy);
}

json model_json(const std::string& path, const plan::ModelDescriptor& m) {
  uint32_t none = 0;
  for (const auto& l : m.layers) none += !l.kv && !l.recurrent ? 1 : 0;
  return {{"path", path},
          {"arch", m.arch},
          {"name", m.name},
          {"known_arch", m.known_arch},
          {"n_layer", m.n_layer},
          {"n_layer_all", m.n_layer_all},
          {"n_embd", m.n_embd},
          {"n_vocab", m.n_vocab},
          {"n_ctx_train", m.n_ctx_train},
          {"sliding_window", m.n_swa},
          {"mla", m.mla},
          {"layers",
           {{"kv", m.count_kv_layers(false)},
            {"kv_swa", m.count_kv_layers(true)},
            {"recurrent", m.count_recurrent_layers()},
            {"indexer", m.count_indexer_layers()},
            {"without_state", none}}},
          {"tensor_bytes", m.tensor_bytes},
          {"weights", weights_json(m)},
          {"metadata_only", m.metadata_only}};
}

json settings_json(const plan::ServerSettings& s) {
  return {{"ctx", s.ctx},
          {"parallel", s.parallel},
          {"kv_unified", s.kv_unified ? json(*s.kv_unified) : json(nullptr)},
          {"cache_type_k", s.cache_type_k},
          {"cache_type_v", s.cache_type_v},
          {"flash_attn", fa_name(s.flash_attn)},
          {"batch", s.batch},
          {"ubatch", s.ubatch},
          {"n_gpu_layers", s.n_gpu_layers},
          {"swa_full", s.swa_full},
          {"cache_ram_mib", s.cache_ram_mib ? json(*s.cache_ram_mib) : json(nullptr)},
          {"ctx_checkpoints", s.ctx_checkpoints ? json(*s.ctx_checkpoints) : json(nullptr)},
          {"ctx_checkpoint_tolerance",
           s.ctx_checkpoint_tolerance ? json(*s.ctx_checkpoint_tolerance) : json(nullptr)},
          {"mla", s.mla ? json(*s.mla) : json(nullptr)}};
}

}  // namespace

double engine_mib(uint64_t bytes) {
  const float mib = static_cast<float>(bytes) / (1024.0F * 1024.0F);
  return std::stod(fmt::format("{:.2f}", static_cast<double>(mib)));
}

std::vector<std::string> plain_server_command(const plan::ServerSettings& s, plan::Fork fork,
                                              const std::string& binary, const std::string& model_path) {
  std::vector<std::string> a = {binary.empty() ? "llama-server" : binary, "-m", model_path};
  auto add = [&a](std::string flag, std::string value) {
    a.push_back(std::move(flag));
    if (!value.empty()) a.push_back(std::move(value));
  };
  add("-c", std::to_string(s.ctx));
  add("-np", std::to_string(s.parallel));
  if (fork == plan::Fork::kMainline && s.kv_unified) add(*s.kv_unified ? "-kvu" : "-no-kvu", "");
  add("-ctk", s.cache_type_k);
  add("-ctv", s.cache_type_v);
  add("-b", std::to_string(s.batch));
  add("-ub", std::to_string(s.ubatch));
  add("-fa", fa_name(s.flash_attn));
  add("-ngl", s.n_gpu_layers < 0 ? "999" : std::to_string(s.n_gpu_layers));
  if (s.swa_full) add("--swa-full", "");
  if (s.cache_ram_mib) add("-cram", std::to_string(*s.cache_ram_mib));
  if (s.ctx_checkpoints) add(fork == plan::Fork::kIk ? "-ctx-ckpt" : "--ctx-checkpoints", std::to_string(*s.ctx_checkpoints));
  if (s.ctx_checkpoint_tolerance && fork == plan::Fork::kIk)
    add("-ctx-ckpt-t", std::to_string(*s.ctx_checkpoint_tolerance));
  if (s.mla && fork == plan::Fork::kIk) add("-mla", std::to_string(*s.mla));
  if (fork == plan::Fork::kMainline) {
    add("-lv", "4");  // allocation lines for `kvgate doctor`
    add("-fit", "off");
  }
  return a;
}

json plan_json(const PlanReport& r) {
  const plan::MemoryPlan& p = *r.plan;
  const plan::ServerSettings& s = *r.settings;
  json j;
  j["kvgate"] = "plan";
  j["schema"] = 1;
  j["model"] = model_json(r.model_path, *r.model);
  j["fork"] = plan::fork_name(p.fork);
  j["settings"] = settings_json(s);
  j["context"] = {{"n_ctx", p.n_ctx},           {"n_ctx_seq", p.n_ctx_seq}, {"n_ctx_slot", p.n_ctx_slot},
                  {"slot_capped_by_train", p.slot_capped_by_train}, {"n_seq_max", p.n_seq_max},
                  {"n_stream", p.n_stream},     {"kv_unified", p.kv_unified}, {"flash_attn", p.flash_attn},
                  {"n_batch", p.n_batch},       {"n_ubatch", p.n_ubatch}};
  json caches = json::array();
  for (const auto& c : p.caches) caches.push_back(cache_json(c));
  j["kv_caches"] = caches;
  j["kv"] = {{"bytes", p.kv_bytes()}, {"mib", engine_mib(p.kv_bytes())}, {"device_bytes", p.kv_device_bytes()}};
  if (p.recurrent) {
    const auto& rs = *p.recurrent;
    j["recurrent"] = {{"rows", rs.rows},       {"seqs", rs.seqs},           {"layers", rs.layers},
                      {"logged_layers", rs.logged_layers}, {"r_bytes", rs.r_bytes}, {"s_bytes", rs.s_bytes},
                      {"bytes", rs.bytes()},   {"device_bytes", rs.device_bytes}, {"r_mib", engine_mib(rs.r_bytes)},
                      {"s_mib", engine_mib(rs.s_bytes)}, {"mib", engine_mib(rs.bytes())}};
  } else {
    j["recurrent"] = nullptr;
  }
  if (p.ik_mla) {
    j["ik_mla"] = {{"mode", p.ik_mla->mode},          {"ckv_type", p.ik_mla->ckv_type},
                   {"ckv_bytes", p.ik_mla->ckv_bytes}, {"kvt_type", p.ik_mla->kvt_type},
                   {"kvt_bytes", p.ik_mla->kvt_bytes}};
  } else {
    j["ik_mla"] = nullptr;
  }
  json comps = json::array();
  for (const auto& c : components(p)) {
    comps.push_back({{"name", c.name}, {"device_bytes", c.device}, {"host_bytes", c.host}, {"estimate", c.estimate}});
  }
  j["components"] = comps;
  j["offload"] = {{"offloaded", p.offloaded_layers}, {"of", p.offloadable_layers}};
  j["unified_memory"] = p.unified_memory;
  if (p.sized) {
    j["host_cache_sizing"] = {
        {"free_bytes", p.sized->free_bytes},
        {"cache_ram_mib", p.sized->cache_ram_mib ? json(*p.sized->cache_ram_mib) : json(nullptr)},
        {"ctx_checkpoints", p.sized->ctx_checkpoints ? json(*p.sized->ctx_checkpoints) : json(nullptr)},
        {"rule", "checkpoints <= 1/4 of free and <= 8 per slot (at least 1); prompt cache <= 1/4 of the rest, "
                 "<= 8192 MiB, in 256 MiB steps; explicit flags win"}};
  } else {
    j["host_cache_sizing"] = nullptr;
  }
  j["totals"] = {{"device_bytes", p.device_total()}, {"host_bytes", p.host_total()}, {"reserve_bytes", p.reserve},
                 {"total_bytes", p.total()},           {"total_mib", engine_mib(p.total())}};
  if (r.budget) {
    const int64_t headroom = static_cast<int64_t>(*r.budget) - static_cast<int64_t>(p.total());
    j["budget"] = {{"memory_bytes", *r.budget}, {"fits", headroom >= 0}, {"headroom_bytes", headroom}};
  } else {
    j["budget"] = nullptr;
  }
  json text = json::array();
  for (const auto& t : plan::text_capacity(p.n_ctx_slot)) {
    text.push_back({{"kind", t.kind},
                    {"chars_per_token", {t.chars_per_token_low, t.chars_per_token_high}},
                    {"chars", {t.chars_low, t.chars_high}}});
  }
  const uint64_t conversation = plan::saved_state_bytes(p, p.n_ctx_slot);
  j["saved_state"] = {{"bytes_per_1k_tokens", plan::saved_state_bytes(p, 1024)},
                      {"bytes_per_full_slot", conversation},
                      {"kv_disk_bytes", r.kv_disk ? json(*r.kv_disk) : json(nullptr)},
                      {"full_slots_on_disk", r.kv_disk && conversation ? json(*r.kv_disk / conversation) : json(nullptr)}};
  j["capacity"] = {{"tokens_per_slot", p.n_ctx_slot}, {"slots", p.n_seq_max}, {"safe_cap", plan::safe_cap(p.n_ctx_slot)},
                   {"text", text}};
  if (r.fit) {
    json trials = json::array();
    for (const auto& t : r.fit->trials) {
      trials.push_back({{"type", t.type}, {"max_ctx", t.max_ctx}, {"error", t.error.empty() ? json(nullptr) : json(t.error)}});
    }
    j["fit"] = {{"max_ctx", r.fit->max_ctx}, {"ctx_limit", r.fit->ctx_limit}, {"trials", trials}};
  } else {
    j["fit"] = nullptr;
  }
  j["estimate"] = p.estimate;
  j["notes"] = p.notes;
  const auto cmd = r.command.empty() ? plain_server_command(s, p.fork, r.server, r.model_path) : r.command;
  j["command"] = cmd;
  std::string line;
  for (const auto& a : cmd) line += (line.empty() ? "" : " ") + quote(a);
  j["command_line"] = line;
  return j;
}

std::string plan_text(const PlanReport& r) {
  const plan::MemoryPlan& p = *r.plan;
  const plan::ModelDescriptor& m = *r.model;
  const plan::ServerSettings& s = *r.settings;
  std::string out;
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  line(fmt::format("model     {} ({}{}), {} blocks: {} KV, {} sliding-window, {} recurrent; trained for {} tokens",
                   m.name.empty() ? r.model_path : m.name, m.arch, m.known_arch ? "" : ", no kvgate rules: estimate",
                   m.n_layer_all, m.count_kv_layers(false), m.count_kv_layers(true), m.count_recurrent_layers(),
                   m.n_ctx_train));
  line(fmt::format("server    {} llama-server: -c {} → {} cells, {} slot(s){}, each slot up to {} tokens{}",
                   plan::fork_name(p.fork), s.ctx, p.n_ctx, p.n_seq_max,
                   p.n_seq_max > 1 ? (p.kv_unified ? " sharing one KV pool" : " with their own KV") : "", p.n_ctx_slot,
                   p.slot_capped_by_train ? " (capped at the training context)" : ""));
  line(fmt::format("KV types  K {} / V {}, flash attention {}, ubatch {}, {} of {} layers on the GPU",
                   s.cache_type_k, s.cache_type_v, p.flash_attn ? "on" : "off", p.n_ubatch, p.offloaded_layers,
                   p.offloadable_layers));
  line(weights_line(m));
  if (p.unified_memory) {
    std::string sizing = "no --memory, so the engine's defaults apply";
    if (p.sized) {
      sizing = fmt::format("{} MiB left after weights, KV, compute and reserve; host prompt cache {}, checkpoints {}",
                           mib_text(static_cast<uint64_t>(std::max<int64_t>(0, p.sized->free_bytes))),
                           p.sized->cache_ram_mib ? fmt::format("{} MiB (sized)", *p.sized->cache_ram_mib)
                                                  : "as given",
                           p.sized->ctx_checkpoints ? fmt::format("{} per slot (sized)", *p.sized->ctx_checkpoints)
                                                    : "as given or not needed");
    }
    line(fmt::format("memory    unified: GPU and host share one pool; {}", sizing));
  }
  line("");
  line(fmt::format("{:<52} {:>12} {:>12}", "MiB", "GPU/device", "host"));
  for (const auto& c : components(p)) {
    line(fmt::format("{:<52} {:>12} {:>12}", c.label + (c.estimate ? " ~" : ""), c.device ? mib_text(c.device) : "-",
                     c.host ? mib_text(c.host) : "-"));
  }
  line(fmt::format("{:<52} {:>12} {:>12}", "total " + mib_text(p.total()) + " MiB", mib_text(p.device_total()),
                   mib_text(p.host_total() + p.reserve)));
  line("(~ estimate; everything else is what the engine allocates, to the byte)");
  if (r.budget) {
    const int64_t headroom = static_cast<int64_t>(*r.budget) - static_cast<int64_t>(p.total());
    line(fmt::format("budget    {} MiB: {}, {} MiB {}", mib_text(*r.budget), headroom >= 0 ? "FITS" : "DOES NOT FIT",
                     mib_text(static_cast<uint64_t>(std::llabs(headroom))), headroom >= 0 ? "to spare" : "short"));
  }
  if (r.fit) {
    std::string trials;
    for (const auto& t : r.fit->trials) {
      trials += fmt::format("{}{} → {}", trials.empty() ? "" : ", ", t.type,
                            t.max_ctx ? util::format_tokens(t.max_ctx) : (t.error.empty() ? "nothing fits" : "refused"));
    }
    line(fmt::format("fit       largest context that fits: {} tokens with K {} / V {} (tried {})", r.fit->max_ctx,
                     s.cache_type_k, s.cache_type_v, trials));
    if (p.unified_memory) {
      line("          order on unified memory: context first; as it grows the host prompt cache shrinks (to 0), then "
           "the checkpoints (to 1 per slot); the context is cut only when even that does not fit");
    }
  }
  line("");
  const auto text = plan::text_capacity(p.n_ctx_slot);
  line(fmt::format("A slot of {} tokens holds about {} characters of English prose, {} characters of Chinese prose,",
                   p.n_ctx_slot, text[0].chars_low, text[1].chars_low));
  line(fmt::format("or {}–{} characters of Chinese numbered lists (约 {} 个汉字的中文连续文本).", text[2].chars_low,
                   text[2].chars_high, text[1].chars_low));
  line(fmt::format("Compact before {} tokens per slot (the recommended safe cap).", plan::safe_cap(p.n_ctx_slot)));
  const uint64_t conversation = plan::saved_state_bytes(p, p.n_ctx_slot);
  line(fmt::format("A conversation's saved engine state (kvgate up --kv-disk) takes {} per 1K tokens, {} for a full slot{}.",
                   util::format_bytes(plan::saved_state_bytes(p, 1024)), util::format_bytes(conversation),
                   r.kv_disk ? fmt::format("; --kv-disk {} holds {} of those", util::format_bytes(*r.kv_disk),
                                           conversation ? *r.kv_disk / conversation : 0)
                             : ""));
  if (!p.notes.empty()) {
    line("");
    line("notes");
    for (const auto& n : p.notes) line("  - " + n);
  }
  line("");
  line("server command");
  std::string cmd;
  const auto argv = r.command.empty() ? plain_server_command(s, p.fork, r.server, r.model_path) : r.command;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + quote(a);
  line("  " + cmd);
  return out;
}

}  // namespace kvgate::cli
