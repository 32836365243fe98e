#include "engine/startup_log.h"

#include <algorithm>
#include <cctype>
#include <tuple>

#include "engine/log_scan.h"

namespace kvgate::engine {
namespace {

bool contains(std::string_view s, std::string_view x) { return s.find(x) != std::string_view::npos; }

// A KV cache's role and cells as announced before its size line (mainline).
using Announced = std::optional<std::pair<plan::CacheRole, uint32_t>>;

bool one_of(std::string_view s, std::initializer_list<std::string_view> list) {
  for (auto x : list) {
    if (s == x) return true;
  }
  return false;
}

bool is_context_tag(std::string_view tag) {
  return one_of(tag, {"llama_context", "llama_init_from_model", "llama_new_context_with_model"});
}

bool is_kv_tag(std::string_view tag) {
  return one_of(tag, {"llama_kv_cache", "llama_kv_cache_unified", "llama_kv_cache_init"});
}

// Lines only ik_llama.cpp prints, on stdout (`INFO [`, `ERR [`) and on stderr (its SIMD
// banner, its own context settings; tests/fixtures/ik/startup-*.stderr.log).
bool is_ik_marker(std::string_view line) {
  if (line.substr(0, 6) == "INFO [" || line.substr(0, 5) == "ERR [" || contains(line, "HAVE_FANCY_SIMD") ||
      contains(line, "mla_attn") || line.substr(0, 22) == "------------------- La") {
    return true;
  }
  if (line.substr(0, 22) != "llama_init_from_model:") return false;
  Scan s(line.substr(22));
  return one_of(s.word(), {"attn_max_b", "fused_moe", "fused_up_gate", "fused_mmad", "graph_reuse", "k_cache_hadam",
                           "v_cache_hadam", "reduce_type", "sched_async", "rope_cache"});
}

// Lines of mainline llama-server; ik prints the first three kinds as well.
bool is_mainline_marker(std::string_view line) {
  return line.substr(0, 11) == "print_info:" || line.substr(0, 5) == "srv  " || line.substr(0, 5) == "slot " ||
         contains(line, "sched_reserve:") || line.substr(0, 14) == "load_tensors: " ||
         line.substr(0, 15) == "llama_kv_cache:" || contains(line, "llama_memory_recurrent:") ||
         contains(line, "log_info: verbosity") || contains(line, "-lv N");
}

// Output of a crash handler, not of the engine: ggml's handler runs gdb on the dying process,
// which prints its chatter and a backtrace after the engine's own last words.
bool is_crash_handler_line(std::string_view line) {
  if (line.size() >= 2 && line[0] == '#' && std::isdigit(static_cast<unsigned char>(line[1]))) return true;
  if (line.substr(0, 2) == "0x" || line.substr(0, 7) == "[New LW" || line.substr(0, 10) == "[Inferior " ||
      line.substr(0, 18) == "[Thread debugging " || line.substr(0, 23) == "Using host libthread_db" ||
      line.substr(0, 7) == "ptrace:" || line == "No stack." || line == "The program is not being run.") {
    return true;
  }
  if (contains(line, "is already traced by process")) return true;
  // gdb's source lines: "30	../sysdeps/unix/sysv/linux/wait4.c: No such file or directory."
  size_t digits = 0;
  while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits]))) ++digits;
  return digits > 0 && digits < line.size() && line[digits] == '\t';
}

// A line that says the engine died: ggml's abort (`file:line: Fatal error`, a failed
// GGML_ASSERT), an uncaught exception, or the crash handler's end.
bool is_crash_line(std::string_view line) {
  return contains(line, ": Fatal error") || contains(line, "GGML_ASSERT") || contains(line, "terminate called") ||
         line.substr(0, 10) == "[Inferior " || contains(line, "Segmentation fault");
}

bool is_error_line(char level, std::string_view tag, std::string_view body, std::string_view line) {
  if (is_crash_handler_line(line)) return false;
  return level == 'E' || line.substr(0, 5) == "ERR [" || contains(line, "error:") || contains(line, "failed to ") ||
         contains(line, "error loading model") || contains(line, "terminate called") || contains(line, "what():") ||
         contains(line, "GGML_ASSERT") || contains(line, ": Fatal error") ||
         contains(line, "is not a supported combination") || (is_context_tag(tag) && contains(body, " requires "));
}

// ik's banner decoration: "==================== K cache bf16 coupled with …".
std::string_view undecorated(std::string_view line) {
  while (!line.empty() && (line.front() == '=' || line.front() == ' ')) line.remove_prefix(1);
  return line;
}


// One line of the log, cleaned and split: `line` is `raw` trimmed and without mainline's
// time/level prefix, `tag` and `body` its "tag: body" parts (tag empty when it has none).
struct LogLine {
  std::string_view raw;
  std::string_view line;
  char level = 0;
  std::string_view tag;
  std::string_view body;
};

// The sections below each read the lines they know into the facts and say whether the line
// was one of theirs. A line may feed several sections.

// Fork markers. ik prints some of mainline's lines too (`print_info:`, `srv  init:`, `slot
// create_check:`), so a line only ik prints decides, wherever it comes; mainline's lines name
// the fork only until then. Also mainline's log verbosity.
bool read_markers(const LogLine& l, StartupFacts& f) {
  const std::string_view line = l.line;
  bool recognised = false;
  if (is_ik_marker(line)) {
    f.fork = plan::Fork::kIk;
    f.llama_markers = true;
    recognised = true;
  } else if (is_mainline_marker(line)) {
    if (!f.fork) f.fork = plan::Fork::kMainline;
    f.llama_markers = true;
    recognised = true;
  }
  if (const size_t at = line.find("verbosity = "); at != std::string_view::npos && contains(line, "-lv N")) {
    Scan v(line.substr(at + 12));
    if (auto n = v.u32()) f.verbosity = *n;
  }
  if (contains(line, "llama_model_loader:") || contains(line, "llm_load_print_meta:") ||
      contains(line, "llama_context:") || contains(line, "llm_load_tensors:") || contains(line, "system_info:") ||
      contains(line, "build info") || contains(line, "common_init")) {
    f.llama_markers = true;
    recognised = true;
  }
  return recognised;
}

// "llama_context: n_ctx = 4096" and its siblings.
void read_context_key(std::string_view key, std::string_view value, StartupFacts& f) {
  Scan v(value);
  if (key == "n_seq_max") f.n_seq_max = v.u32();
  if (key == "n_ctx") f.n_ctx = v.u32();
  if (key == "n_ctx_seq") f.n_ctx_seq = v.u32();
  if (key == "n_batch") f.n_batch = v.u32();
  if (key == "n_ubatch") f.n_ubatch = v.u32();
  if (key == "kv_unified") f.kv_unified = parse_bool_word(value);
  if (key == "mla_attn") f.mla_attn = v.i32();
  if (key == "flash_attn") {
    f.flash_attn_setting = std::string(value.substr(0, 16));
    if (auto b = parse_bool_word(value)) f.flash_attn = b;
  }
}

// The training context, the context's settings, and a context over the training one.
bool read_context(const LogLine& l, StartupFacts& f) {
  Scan s(l.body);
  if ((l.tag == "print_info" || l.tag == "llm_load_print_meta") && s.lit("n_ctx_train") && s.lit("=")) {
    if (auto v = s.u32()) f.n_ctx_train = *v;
    return true;
  }
  if (!is_context_tag(l.tag)) return false;
  Scan k(l.body);
  const std::string_view key = k.word();
  if (k.lit("=")) {
    read_context_key(key, trim(k.rest()), f);
    return true;
  }
  if (key == "n_ctx_seq" && contains(l.body, "> n_ctx_train")) {
    Scan w(l.body);
    if (w.lit("n_ctx_seq") && w.lit("(")) {
      auto a = w.u32();
      if (a && w.lit(")") && w.lit(">") && w.lit("n_ctx_train") && w.lit("(")) {
        if (auto b = w.u32()) f.ctx_seq_over_train = std::make_pair(*a, *b);
      }
    }
    return true;
  }
  return false;
}

bool read_flash_attn(const LogLine& l, StartupFacts& f) {
  if (contains(l.line, "Flash Attention enabled") || contains(l.line, "enabling flash_attn")) {
    f.flash_attn = true;
    return true;
  }
  if (contains(l.line, "Flash Attention not supported") || contains(l.line, "flash_attn is not compatible")) {
    f.flash_attn = false;
    return true;
  }
  return false;
}

// Mainline announces a cache's role and cells ("creating non-SWA KV cache, size = 4096
// cells") on the line before its size line.
bool read_kv_announcement(const LogLine& l, Announced& announced) {
  const std::string_view body = l.body;
  if (!contains(body, "creating") || !contains(body, "KV cache, size =")) return false;
  plan::CacheRole role = plan::CacheRole::kMain;
  if (contains(body, "non-SWA") || contains(body, "main KV")) {
    role = plan::CacheRole::kMain;
  } else if (contains(body, "SWA")) {
    role = plan::CacheRole::kSwa;
  } else if (contains(body, "indexer")) {
    role = plan::CacheRole::kIndexer;
  }
  Scan c(body.substr(body.find("size =") + 6));
  if (auto cells = c.u32()) announced = std::make_pair(role, *cells);
  return true;
}

// "llama_kv_cache: size = N MiB (cells, layers, seqs), K (type): N MiB, V (type): N MiB",
// with the role the announcement before it gave.
bool read_kv_cache(const LogLine& l, StartupFacts& f, Announced& announced) {
  Scan s(l.body);
  if (!is_kv_tag(l.tag) || !s.lit("size =")) return false;
  KvCacheFact kv;
  auto mib = s.num();
  std::optional<Shape> shape;
  if (mib && s.lit("MiB") && s.lit("(")) shape = parse_shape(s);
  if (shape && s.lit("),") && parse_typed(s, "K", kv.type_k, kv.k_mib) && s.lit(",") &&
      parse_typed(s, "V", kv.type_v, kv.v_mib)) {
    kv.mib = *mib;
    kv.cells = shape->cells;
    kv.layers = shape->layers;
    kv.seqs = shape->seqs;
    kv.streams = shape->streams.value_or(1);
    kv.line = f.lines;
    if (announced) {
      kv.role = announced->first;
      kv.announced_cells = announced->second;
      announced.reset();
    }
    f.kv_caches.push_back(std::move(kv));
  }
  return true;
}

// "llama_memory_recurrent: size = N MiB (cells, layers, seqs[, N rs_seq]), R (type): …, S (type): …".
bool read_recurrent(const LogLine& l, StartupFacts& f) {
  Scan s(l.body);
  if (l.tag != "llama_memory_recurrent" || !s.lit("size =")) return false;
  RecurrentFact r;
  auto mib = s.num();
  std::optional<Shape> shape;
  if (mib && s.lit("MiB") && s.lit("(")) {
    auto cells = s.u32();
    if (cells && s.lit("cells,")) {
      auto layers = s.u32();
      auto seqs = layers && s.lit("layers,") ? s.u32() : std::nullopt;
      if (seqs && s.lit("seqs")) shape = Shape{*cells, *layers, *seqs, std::nullopt};
    }
  }
  if (!shape) return true;
  if (auto rs = s.u32(); rs && s.lit("rs_seq")) r.rs_seq = *rs;
  if (s.lit("),") && parse_typed(s, "R", r.type_r, r.r_mib) && s.lit(",") && parse_typed(s, "S", r.type_s, r.s_mib)) {
    std::string p_type;
    if (s.lit(",")) parse_typed(s, "P", p_type, r.p_mib);
    r.mib = *mib;
    r.cells = shape->cells;
    r.layers = shape->layers;
    r.seqs = shape->seqs;
    f.recurrent = r;
  }
  return true;
}

// ik's "KV self size = N MiB, K (type): …, V (type): …" (or its MLA form "c^KV (type): …")
// and "KV self indexer size = N MiB".
bool read_ik_kv_self(const LogLine& l, StartupFacts& f) {
  Scan s(l.body);
  if (contains(l.body, "KV self size") && s.lit("KV self size") && s.lit("=")) {
    KvSelfFact kv;
    auto mib = s.num();
    if (mib && s.lit("MiB,")) {
      kv.mib = *mib;
      if (parse_typed(s, "K", kv.type_k, kv.k_mib)) {
        if (s.lit(",")) parse_typed(s, "V", kv.type_v, kv.v_mib);
        f.kv_self = kv;
      } else if (parse_typed(s, "c^KV", kv.type_k, kv.k_mib)) {
        kv.mla = true;
        if (s.lit(",") && !s.lit("kv^T: not used")) parse_typed(s, "kv^T", kv.type_v, kv.v_mib);
        f.kv_self = kv;
      }
    }
    return true;
  }
  if (contains(l.body, "KV self indexer size") && s.lit("KV self indexer size") && s.lit("=")) {
    if (auto mib = s.num()) f.kv_self_indexer_mib = *mib;
    return true;
  }
  return false;
}

// "<dev> [kind] buffer size = N MiB" for model, KV, recurrent-state, compute and output buffers.
bool read_buffers(const LogLine& l, StartupFacts& f) {
  const size_t at = l.body.find(" buffer size = ");
  if (at == std::string_view::npos || l.tag.empty()) return false;
  Scan head(l.body.substr(0, at));
  std::vector<std::string_view> words;
  for (std::string_view w = head.word(); !w.empty(); w = head.word()) words.push_back(w);
  Scan v(l.body.substr(at + 15));
  auto mib = v.num();
  if (!mib || !v.lit("MiB") || words.empty() || words.size() > 3) return false;
  std::string_view kind = words.back();
  std::string device;
  if (one_of(kind, {"model", "KV", "RS", "compute", "output"}) && words.size() >= 2) {
    device = std::string(words[words.size() - 2]);
  } else if (l.tag == "llm_load_tensors" || l.tag == "load_tensors") {
    device = std::string(kind);
    kind = "model";
  } else {
    return false;
  }
  BufferFact b{device, *mib};
  if (kind == "model") f.model_buffers.push_back(b);
  if (kind == "KV") f.kv_buffers.push_back(b);
  if (kind == "RS") f.rs_buffers.push_back(b);
  if (kind == "compute") f.compute_buffers.push_back(b);
  if (kind == "output") f.output_buffers.push_back(b);
  return true;
}

// "offloaded N/M layers to GPU".
bool read_offload(const LogLine& l, StartupFacts& f) {
  const size_t at = l.line.find("offloaded ");
  if (at == std::string_view::npos || !contains(l.line, "layers to GPU")) return false;
  Scan o(l.line.substr(at + 10));
  auto n = o.u32();
  if (n && o.lit("/")) {
    if (auto m = o.u32(); m && o.lit("layers to GPU")) f.offloaded = std::make_pair(*n, *m);
  }
  return true;
}

// Mainline's "initializing, n_slots = N, n_ctx_slot = C[, kv_unified = 'B']" and its note
// that the slot context was capped at the training context.
bool read_mainline_slots(const LogLine& l, StartupFacts& f) {
  const std::string_view line = l.line;
  if (const size_t at = line.find("initializing, n_slots ="); at != std::string_view::npos) {
    Scan sl(line.substr(at + 23));
    auto n = sl.u32();
    if (n && sl.lit(",") && sl.lit("n_ctx_slot =")) {
      f.n_slots = *n;
      if (auto c = sl.u32()) f.n_ctx_slot = *c;
      if (sl.lit(",") && sl.lit("kv_unified =") && sl.lit("'")) {
        if (auto u = sl.until('\'')) {
          if (auto b = parse_bool_word(*u)) f.kv_unified = b;
        }
      }
    }
    return true;
  }
  if (const size_t cap = line.find("the slot context ("); cap != std::string_view::npos) {
    Scan c(line.substr(cap + 18));
    auto req = c.u32();
    if (req && c.lit(")") && c.lit("exceeds the training context of the model") && c.lit("(")) {
      if (auto train = c.u32()) f.slot_capped = std::make_pair(*req, *train);
    }
    return true;
  }
  return false;
}

// ik's "INFO [ init] initializing slots | … n_slots=N" and "new slot | … n_ctx_slot=C" (older
// builds: "new slot, n_ctx = C").
bool read_ik_slots(const LogLine& l, StartupFacts& f) {
  const std::string_view line = l.line;
  if (contains(line, "initializing slots") && line.substr(0, 6) == "INFO [") {
    if (auto n = ik_field(line, "n_slots")) f.n_slots = *n;
    return true;
  }
  if (!contains(line, "new slot")) return false;
  if (auto c = ik_field(line, "n_ctx_slot")) {
    f.n_ctx_slot = *c;
  } else if (const size_t pos = line.find("new slot, n_ctx ="); pos != std::string_view::npos) {
    Scan c2(line.substr(pos + 17));
    if (auto n = c2.u32(); n && !f.n_ctx_slot) f.n_ctx_slot = *n;
  }
  return true;
}

// How the start went: model loaded, listening, or crashed.
bool read_outcome(const LogLine& l, StartupFacts& f) {
  bool recognised = false;
  if (contains(l.line, "model loaded")) {
    f.model_loaded = true;
    recognised = true;
  }
  if (contains(l.line, "listening on") || contains(l.line, "HTTP server listening")) {
    f.listening = true;
    recognised = true;
  }
  if (is_crash_line(l.line)) {
    f.crashed = true;
    recognised = true;
  }
  return recognised;
}

// The engine's error lines (at most 20, repeats once). ik explains "… is not a supported
// combination …" with "Supported types are:" and one indented type a line: they join the
// error line they explain (`list_open` while such a list may follow).
void read_errors(const LogLine& l, StartupFacts& f, bool& list_open) {
  const std::string_view line = l.line;
  const bool indented = l.raw.size() > line.size() && std::isspace(static_cast<unsigned char>(l.raw.front()));
  if (list_open && (line == "Supported types are:" || (indented && line.find(' ') == std::string_view::npos))) {
    if (!f.errors.empty() && f.errors.back().size() < 300) {
      std::string& last = f.errors.back();
      last += last.back() == ':' || last.back() == '.' ? " " : ", ";
      last += line;
    }
    return;
  }
  list_open = false;
  if (is_error_line(l.level, l.tag, l.body, line)) {
    const std::string_view text = undecorated(line).substr(0, 300);
    if (f.errors.size() < 20 && (f.errors.empty() || f.errors.back() != text)) f.errors.emplace_back(text);
    list_open = contains(line, "is not a supported combination");
  }
}

}  // namespace

bool StartupFacts::has_allocation_facts() const {
  return n_ctx.has_value() || !kv_caches.empty() || kv_self.has_value() || recurrent.has_value() ||
         !compute_buffers.empty() || !model_buffers.empty() || !kv_buffers.empty();
}

const KvCacheFact* StartupFacts::kv_cache(plan::CacheRole role) const {
  for (const auto& c : kv_caches) {
    if (c.role == role) return &c;
  }
  return nullptr;
}

void StartupLogParser::feed(std::string_view raw) {
  StartupFacts& f = facts_;
  ++f.lines;
  if (raw.size() > 4096) raw = raw.substr(0, 4096);  // no startup line is this long
  std::string cleaned;
  if (raw.find('\x1b') != std::string_view::npos) {
    cleaned = strip_colours(raw);
    raw = cleaned;
  }
  LogLine l;
  l.raw = raw;
  l.line = trim(raw);
  if (l.line.empty()) return;
  l.level = strip_prefix(l.line);
  std::tie(l.tag, l.body) = split_tag(l.line);

  bool recognised = read_markers(l, f);
  recognised = read_context(l, f) || recognised;
  recognised = read_flash_attn(l, f) || recognised;
  // One of: a cache announced, a KV cache, the recurrent state, ik's KV lines.
  recognised = (read_kv_announcement(l, announced_) || read_kv_cache(l, f, announced_) || read_recurrent(l, f) ||
                read_ik_kv_self(l, f)) ||
               recognised;
  recognised = read_buffers(l, f) || recognised;
  recognised = read_offload(l, f) || recognised;
  recognised = (read_mainline_slots(l, f) || read_ik_slots(l, f)) || recognised;
  recognised = read_outcome(l, f) || recognised;
  read_errors(l, f, list_open_);
  if (recognised) ++f.recognised;
}

StartupFacts parse_startup_log(std::string_view text) {
  StartupLogParser parser;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    parser.feed(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return parser.facts();
}

StartFailure explain_start_failure(const std::vector<std::string>& lines, size_t tail) {
  StartupLogParser parser;
  for (const auto& l : lines) parser.feed(l);
  StartFailure out;
  out.cause = parser.facts().errors;
  out.crashed = parser.facts().crashed;
  for (auto it = lines.rbegin(); it != lines.rend() && out.last_lines.size() < tail; ++it) {
    const std::string_view line = trim(*it);
    if (!line.empty() && !is_crash_handler_line(line)) out.last_lines.emplace_back(line);
  }
  std::reverse(out.last_lines.begin(), out.last_lines.end());
  return out;
}

std::string describe_start_failure(const StartFailure& failure) {
  const bool said = !failure.cause.empty();
  std::string out = said ? "; it said:" : "; its last lines:";
  for (const auto& l : said ? failure.cause : failure.last_lines) out += "\n  | " + l;
  return out;
}

Status require_allocation_facts(const StartupFacts& f) {
  if (f.has_allocation_facts()) return {};
  if (f.llama_markers || f.fork) {
    if (f.fork == plan::Fork::kIk) {
      return Error("the log has ik_llama.cpp lines but none about the context, KV cache or buffers: it is cut "
                   "short or is not the server's startup (capture both stdout and stderr from the start)");
    }
    const std::string level = f.verbosity ? " (this log was written at verbosity " + std::to_string(*f.verbosity) + ")" : "";
    return Error("the log has llama-server lines but none about the context, KV cache or buffers: mainline "
                 "llama-server prints them only at verbosity 4" + level +
                 "; restart it with -lv 4 (--log-verbosity 4) and capture stderr from the start");
  }
  return Error("this is not a llama-server startup log: none of its lines is one llama-server or ik_llama.cpp "
               "prints (mainline needs -lv 4 to print its allocation lines)");
}

}  // namespace kvgate::engine
