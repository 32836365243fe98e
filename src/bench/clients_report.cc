// The files and the text summary of kvgate bench clients.
#include <fmt/format.h>

#include "bench/clients.h"
#include "bench/csv.h"
#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

// The runs of one behaviour on one path, pooled.
struct Pooled {
  std::string behaviour, path;
  size_t runs = 0, turns = 0, failed = 0, compactions = 0, summary_failures = 0;
  uint64_t compaction_bound = 0;
  uint64_t prompt = 0, prefilled = 0, ideal_prompt = 0, ideal_prefilled = 0;
  double engine_processed = 0, engine_cached = 0, growth_sum = 0, steady_sum = 0;
  size_t sessions = 0, conversations = 0;
  std::map<std::string, size_t> failures;
  std::map<std::string, size_t> violations;  // by property
  std::string first_error;
  double ratio() const { return prompt == 0 ? 0 : static_cast<double>(prefilled) / static_cast<double>(prompt); }
  double bound() const {
    return ideal_prompt == 0 ? 0 : static_cast<double>(ideal_prefilled) / static_cast<double>(ideal_prompt);
  }
};

std::vector<Pooled> pool(const ClientsReport& r) {
  std::vector<Pooled> out;
  for (const auto& run : r.runs) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const Pooled& p) { return p.behaviour == run.behaviour && p.path == run.path; });
    if (it == out.end()) it = out.insert(out.end(), Pooled{.behaviour = run.behaviour, .path = run.path});
    const RunFigures& f = run.figures;
    ++it->runs;
    it->turns += f.turns;
    it->failed += f.turns - f.ok;
    it->compactions += f.compactions;
    it->summary_failures += f.summary_failures;
    it->compaction_bound += f.compaction_bound;
    it->prompt += f.prompt_tokens;
    it->prefilled += f.prefilled_tokens;
    it->ideal_prompt += f.ideal.prompt_tokens;
    it->ideal_prefilled += f.ideal.prefilled_tokens;
    it->engine_processed += f.engine_processed;
    it->engine_cached += f.engine_cached;
    it->growth_sum += f.growth;
    it->steady_sum += f.steady_ratio_bound;
    it->sessions += f.sessions;
    it->conversations += f.conversations_started;
    for (const auto& [k, n] : f.failures) it->failures[k] += n;
    for (const auto& v : run.violations) ++it->violations[v.property];
    for (const auto& t : run.turns) {
      if (it->first_error.empty() && !t.ok()) {
        it->first_error = fmt::format("seed {} client {} turn {}: {}", run.seed, t.client, t.turn, t.error.substr(0, 300));
      }
    }
  }
  return out;
}

std::string counts_text(const std::map<std::string, size_t>& m) {
  std::string s;
  for (const auto& [k, n] : m) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", n, k);
  return s;
}

std::string compaction_text(const json& events) {
  std::string out;
  for (const auto& ev : events) {
    out += fmt::format("{}{} {} {}->{}{}", out.empty() ? "" : "; ", ev.value("level", ""), ev.value("trigger", ""),
                       ev.value("tokens_before", 0), ev.value("tokens_after", 0),
                       ev.contains("summary_error") ? " (summary failed)" : "");
  }
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : "; ") + i;
  return s;
}

json figures_json(const RunFigures& f) {
  return {{"turns", f.turns},
          {"ok", f.ok},
          {"failures", f.failures},
          {"compactions", f.compactions},
          {"compaction_bound", f.compaction_bound},
          {"summary_failures", f.summary_failures},
          {"prompt_tokens", f.prompt_tokens},
          {"cached_tokens", f.cached_tokens},
          {"prefilled_tokens", f.prefilled_tokens},
          {"prefilled_ratio", f.prefilled_ratio},
          {"ratio_bound", f.ratio_bound},
          {"steady_ratio_bound", f.steady_ratio_bound},
          {"ideal", {{"prompt_tokens", f.ideal.prompt_tokens},
                     {"prefilled_tokens", f.ideal.prefilled_tokens},
                     {"compactions", f.ideal.compactions}}},
          {"engine_processed_tokens", f.engine_processed},
          {"engine_cached_tokens", f.engine_cached},
          {"engine_processed_ratio", f.engine_cached_known ? json(f.engine_processed_ratio) : json(nullptr)},
          {"conversations_started", f.conversations_started},
          {"sessions", f.sessions},
          {"growth_tokens", f.growth}};
}

json turn_json(const ClientTurnResult& t) {
  return {{"client", t.client},
          {"turn", t.turn},
          {"request", t.request},
          {"kind", t.kind},
          {"new_conversation", t.new_conversation},
          {"notes", t.notes},
          {"asks_tool_call", t.asks_tool_call},
          {"tool_calls", t.tool_calls},
          {"status", t.status},
          {"result", failure_name(t.failure)},
          {"error", t.error.empty() ? json(nullptr) : json(t.error.substr(0, 1000))},
          {"messages", t.request_messages},
          {"request_bytes", t.request_bytes},
          {"total_ms", t.total_ms},
          {"prompt_tokens", t.prompt_tokens},
          {"cached_tokens", t.cached_tokens},
          {"prefilled_tokens", t.prefilled_tokens},
          {"completion_tokens", t.completion_tokens},
          {"engine_processed_tokens", t.engine_processed},
          {"engine_cached_tokens", t.engine_cached},
          {"client_tokens", t.client_tokens},
          {"increment_tokens", t.increment_tokens},
          {"rewrite_tokens", t.rewrite_tokens},
          {"compactions", t.compactions},
          {"session", t.session}};
}

json pooled_json(const Pooled& p) {
  return {{"behaviour", p.behaviour},
          {"path", p.path},
          {"runs", p.runs},
          {"turns", p.turns},
          {"failed_turns", p.failed},
          {"failures", p.failures},
          {"compactions", p.compactions},
          {"compaction_bound", p.compaction_bound},
          {"summary_failures", p.summary_failures},
          {"prefilled_ratio", p.ratio()},
          {"ratio_bound", p.bound()},
          {"steady_ratio_bound", p.runs ? p.steady_sum / static_cast<double>(p.runs) : 0.0},
          {"growth_tokens", p.runs ? p.growth_sum / static_cast<double>(p.runs) : 0.0},
          {"engine_processed_tokens", p.engine_processed},
          {"engine_cached_tokens", p.engine_cached},
          {"sessions", p.sessions},
          {"conversations_started", p.conversations},
          {"violations", p.violations},
          {"first_error", p.first_error}};
}

}  // namespace

json to_json(const ClientsReport& r) {
  json runs = json::array();
  for (const auto& run : r.runs) {
    json violations = json::array();
    for (const auto& v : run.violations) {
      violations.push_back({{"property", v.property}, {"where", v.where}, {"detail", v.detail}});
    }
    json turns = json::array();
    for (const auto& t : run.turns) turns.push_back(turn_json(t));
    runs.push_back({{"behaviour", run.behaviour},
                    {"seed", run.seed},
                    {"path", run.path},
                    {"clients", run.clients},
                    {"watermarks", {{"high", run.marks.high}, {"low", run.marks.low}, {"reserve", run.marks.reserve}}},
                    {"figures", figures_json(run.figures)},
                    {"violations", violations},
                    {"wall_s", run.wall_s},
                    {"turns", turns}});
  }
  json behaviours = json::array();
  for (const auto& p : pool(r)) behaviours.push_back(pooled_json(p));
  return {{"bench", "clients"}, {"options", r.options}, {"behaviours", behaviours}, {"runs", runs}, {"wall_s", r.wall_s}};
}

Status write_clients(const ClientsReport& r, OutputDir& out) {
  CsvWriter runs({"behaviour", "seed", "path", "clients", "turns", "ok", "failures", "compactions",
                  "compaction_bound", "summary_failures", "prompt_tokens", "prefilled_tokens", "prefilled_ratio",
                  "ratio_bound", "steady_ratio_bound", "engine_processed_tokens", "engine_cached_tokens",
                  "conversations_started", "sessions", "growth_tokens", "high", "low", "violations", "wall_s"});
  CsvWriter turns({"behaviour", "seed", "path", "client", "turn", "kind", "new_conversation", "status", "result",
                   "messages", "client_tokens", "increment_tokens", "rewrite_tokens", "prompt_tokens",
                   "cached_tokens", "prefilled_tokens", "completion_tokens", "engine_processed_tokens",
                   "engine_cached_tokens", "tool_calls", "compactions", "session", "total_ms", "notes", "error"});
  for (const auto& run : r.runs) {
    const RunFigures& f = run.figures;
    runs.row({run.behaviour, std::to_string(run.seed), run.path, std::to_string(run.clients),
              std::to_string(f.turns), std::to_string(f.ok), counts_text(f.failures), std::to_string(f.compactions),
              std::to_string(f.compaction_bound), std::to_string(f.summary_failures),
              std::to_string(f.prompt_tokens), std::to_string(f.prefilled_tokens),
              format_number(f.prefilled_ratio, 4), format_number(f.ratio_bound, 4),
              format_number(f.steady_ratio_bound, 4), format_number(f.engine_processed, 0),
              format_number(f.engine_cached, 0), std::to_string(f.conversations_started),
              std::to_string(f.sessions), format_number(f.growth, 0), std::to_string(run.marks.high),
              std::to_string(run.marks.low), std::to_string(run.violations.size()), format_number(run.wall_s, 1)});
    for (const auto& t : run.turns) {
      turns.row({run.behaviour, std::to_string(run.seed), run.path, std::to_string(t.client), std::to_string(t.turn),
                 t.kind, t.new_conversation ? "1" : "0", std::to_string(t.status), failure_name(t.failure),
                 std::to_string(t.request_messages), std::to_string(t.client_tokens),
                 std::to_string(t.increment_tokens), std::to_string(t.rewrite_tokens),
                 std::to_string(t.prompt_tokens), std::to_string(t.cached_tokens),
                 std::to_string(t.prefilled_tokens), std::to_string(t.completion_tokens),
                 format_number(t.engine_processed, 0), format_number(t.engine_cached, 0),
                 std::to_string(t.tool_calls), compaction_text(t.compactions), t.session,
                 format_number(t.total_ms, 1), joined(t.notes), t.error.substr(0, 300)});
    }
  }
  KV_TRY(out.write("clients_runs.csv", runs.text()));
  KV_TRY(out.write("clients_turns.csv", turns.text()));
  KV_TRY(out.write("clients.json", util::json_text(to_json(r), 1) + "\n"));
  return {};
}

std::string clients_text(const ClientsReport& r) {
  std::string s = fmt::format("clients: {} turns per client, context {}, watermarks {}/{}, seeds {}, plain words {}\n",
                              r.options.value("turns", 0), r.options.value("context", 0),
                              r.options.value("high_watermark", 0), r.options.value("low_watermark", 0),
                              util::json_text(r.options["seeds"]), r.options.value("plain_words", false) ? "on" : "off");
  s += fmt::format("  {:<16} {:<7} {:>4} {:>6} {:>7} {:>9} {:>8} {:>7} {:>7} {:>7} {:>7} {:>9} {:>10}\n", "behaviour",
                   "path", "runs", "turns", "failed", "compact", "ratio", "bound", "steady", "engine", "g", "sess/conv",
                   "violations");
  for (const auto& p : pool(r)) {
    size_t v = 0;
    for (const auto& [k, n] : p.violations) v += n;
    const double engine_all = p.engine_processed + p.engine_cached;
    s += fmt::format("  {:<16} {:<7} {:>4} {:>6} {:>7} {:>9} {:>8.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.0f} {:>9} {:>10}\n",
                     p.behaviour, p.path, p.runs, p.turns, p.failed,
                     p.path == "gateway" ? fmt::format("{}/{}", p.compactions, p.compaction_bound) : "-", p.ratio(),
                     p.bound(), p.runs ? p.steady_sum / static_cast<double>(p.runs) : 0.0,
                     engine_all > 0 ? p.engine_processed / engine_all : 0.0,
                     p.runs ? p.growth_sum / static_cast<double>(p.runs) : 0.0,
                     p.path == "gateway" ? fmt::format("{}/{}", p.sessions, p.conversations) : "-", v);
  }
  s += "  (compact: compactions / bound; ratio: prefilled ÷ prompt of the answered turns; bound: the ideal gateway on "
       "the same turns; steady: 2·H·g/((H−L)(H+L)); engine: computed ÷ (computed + reused) by the engine's counters, "
       "summary requests included)\n";
  for (const auto& p : pool(r)) {
    if (!p.failures.empty()) {
      s += fmt::format("  {} {} failures: {}; first: {}\n", p.behaviour, p.path, counts_text(p.failures), p.first_error);
    }
    if (p.summary_failures > 0) {
      s += fmt::format("  {} {}: {} compaction(s) whose model summary failed\n", p.behaviour, p.path, p.summary_failures);
    }
    if (!p.violations.empty()) s += fmt::format("  {} {} violations: {}\n", p.behaviour, p.path, counts_text(p.violations));
  }
  size_t shown = 0, all = 0;
  std::string lines;
  for (const auto& run : r.runs) {
    for (const auto& v : run.violations) {
      ++all;
      if (shown >= 30) continue;
      ++shown;
      lines += fmt::format("    {} seed {}: {} at {}: {}\n", run.behaviour, run.seed, v.property, v.where,
                           v.detail.substr(0, 400));
    }
  }
  if (all > 0) {
    s += fmt::format("  violations ({} in all{}):\n", all, all > shown ? fmt::format(", the first {}; every one in clients.json", shown) : "");
    s += lines;
  }
  s += fmt::format("{:.1f} s\n", r.wall_s);
  return s;
}

}  // namespace kvgate::bench
