// The files and the text summary of kvgate bench replay.
#include <cmath>

#include <fmt/format.h>

#include "bench/csv.h"
#include "bench/replay.h"
#include "bench/svg_chart.h"
#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

const char* color_of(const std::string& path) { return path == "direct" ? "#d62728" : "#1f77b4"; }

std::string compaction_text(const json& events) {
  std::string out;
  for (const auto& ev : events) {
    if (!out.empty()) out += "; ";
    out += fmt::format("{} {} {}->{}", ev.value("level", ""), ev.value("trigger", ""),
                       ev.value("tokens_before", 0), ev.value("tokens_after", 0));
  }
  return out;
}

json group_json(const TurnGroup& g) {
  return {{"turns", g.turns},
          {"ok", g.ok},
          {"prompt_tokens", g.prompt_tokens},
          {"cached_tokens", g.cached_tokens},
          {"prefilled_tokens", g.prefilled_tokens},
          {"ttft_ms", to_json(g.ttft_ms)}};
}

json summary_json(const PathSummary& s) {
  return {{"turns", s.turns},
          {"ok", s.ok},
          {"failures", s.failures},
          {"first_failure_turn", s.first_failure_turn == 0 ? json(nullptr) : json(s.first_failure_turn)},
          {"prompt_tokens", s.prompt_tokens},
          {"cached_tokens", s.cached_tokens},
          {"prefilled_tokens", s.prefilled_tokens},
          {"prefilled_ratio", s.prefilled_ratio},
          {"engine_processed_tokens", s.engine_processed},
          {"engine_cached_tokens", s.engine_cached},
          {"engine_processed_ratio", s.engine_cached_known ? json(s.engine_processed_ratio) : json(nullptr)},
          {"ttft_ms", to_json(s.ttft_ms)},
          {"total_ms", to_json(s.total_ms)},
          {"compactions", s.compactions}};
}

// The restart lines of the summary: when the engines were killed, and per path the turns
// right after a restart against the others.
std::string restart_text(const ReplayReport& r) {
  if (r.restart_every == 0 || r.paths.empty()) return {};
  std::string turns;
  for (size_t t : r.paths.front().summary.restart_turns)
    turns += fmt::format("{}{}", turns.empty() ? "" : ", ", t);
  std::string s =
      fmt::format("  engine killed (SIGKILL) and started again after every {} turns, before turn{} {}\n",
                  r.restart_every, r.paths.front().summary.restart_turns.size() == 1 ? "" : "s",
                  turns.empty() ? "(none: the trace is shorter)" : turns);
  if (r.path("gateway")) {
    s += r.saved_states_off.empty()
             ? std::string("  gateway: saved conversation states on (restored after a restart)\n")
             : fmt::format("  gateway: saved conversation states off: {}\n", r.saved_states_off);
  }
  s += fmt::format("  {:<8} {:<14} {:>7} {:>10} {:>10} {:>13} {:>13} {:>13}\n", "path", "turns", "ok",
                   "TTFT mean", "TTFT p50", "prompt tok", "cached", "prefilled");
  auto row = [&s](const std::string& path, const char* label, const TurnGroup& g) {
    s += fmt::format("  {:<8} {:<14} {:>7} {:>9.2f}s {:>9.2f}s {:>13} {:>13} {:>13}\n", path, label,
                     fmt::format("{}/{}", g.ok, g.turns), g.ttft_ms.mean / 1000, g.ttft_ms.p50 / 1000,
                     g.prompt_tokens, g.cached_tokens, g.prefilled_tokens);
  };
  for (const auto& p : r.paths) {
    row(p.name, "after restart", p.summary.after_restart);
    row(p.name, "other", p.summary.other_turns);
  }
  return s;
}

std::string chart(const ReplayReport& r) {
  SvgChart ttft{.title = fmt::format("Replay of {}: time to first token per turn", r.trace),
                .note = "crosses: failed turns",
                .x_label = "turn",
                .y_label = "TTFT (s)"};
  SvgChart prefilled{.title = "Prompt tokens the engine computed (prefilled) per turn",
                     .note = "the rest of each prompt came from the engine's KV cache",
                     .x_label = "turn",
                     .y_label = "prefilled tokens"};
  SvgChart prompt{.title = "Prompt tokens sent to the engine per turn",
                  .note = "direct: the client's whole history; gateway: its view (dotted lines: compactions)",
                  .x_label = "turn",
                  .y_label = "prompt tokens",
                  .legend_left = true};
  for (const auto& p : r.paths) {
    SvgSeries a{.label = p.name, .color = color_of(p.name)};
    SvgSeries b = a, c = a;
    for (size_t i = 0; i < p.turns.size(); ++i) {
      const auto& t = p.turns[i];
      const double x = static_cast<double>(t.turn);
      a.x.push_back(x);
      b.x.push_back(x);
      c.x.push_back(x);
      a.y.push_back(t.ok() && t.ttft_ms >= 0 ? t.ttft_ms / 1000.0 : NAN);
      b.y.push_back(t.ok() ? static_cast<double>(t.prefilled_tokens) : NAN);
      c.y.push_back(t.prompt_tokens > 0 ? static_cast<double>(t.prompt_tokens) : NAN);
      if (!t.ok()) {
        a.crossed.push_back(i);
        b.crossed.push_back(i);
        c.crossed.push_back(i);
      }
      if (!t.compactions.empty()) {
        prompt.markers.push_back({.x = x, .label = "", .color = "#9467bd"});
      }
    }
    ttft.series.push_back(std::move(a));
    prefilled.series.push_back(std::move(b));
    prompt.series.push_back(std::move(c));
  }
  if (const uint64_t ctx = r.options.value("context", uint64_t{0}); ctx > 0 && !prompt.series.empty()) {
    SvgSeries limit{.label = "engine context", .color = "#7f7f7f", .dashed = true, .points = false};
    for (double x : prompt.series.front().x) {
      limit.x.push_back(x);
      limit.y.push_back(static_cast<double>(ctx));
    }
    prompt.series.push_back(std::move(limit));
  }
  const SvgChart panels[] = {ttft, prefilled, prompt};
  return render_svg(panels, 880, 340);
}

}  // namespace

json to_json(const ReplayReport& r) {
  const bool restarts = r.restart_every > 0;
  json paths = json::array();
  for (const auto& p : r.paths) {
    json turns = json::array();
    for (const auto& t : p.turns) {
      turns.push_back({{"turn", t.turn},
                       {"status", t.status},
                       {"result", failure_name(t.failure)},
                       {"error", t.error.empty() ? json(nullptr) : json(t.error.substr(0, 500))},
                       {"stream", t.stream},
                       {"live", t.live},
                       {"messages", t.request_messages},
                       {"request_bytes", t.request_bytes},
                       {"ttft_ms", t.ttft_ms < 0 ? json(nullptr) : json(t.ttft_ms)},
                       {"total_ms", t.total_ms},
                       {"prompt_tokens", t.prompt_tokens},
                       {"cached_tokens", t.cached_tokens},
                       {"prefilled_tokens", t.prefilled_tokens},
                       {"engine_processed_tokens", t.engine_processed},
                       {"engine_cached_tokens", t.engine_cached},
                       {"compactions", t.compactions}});
      if (restarts) turns.back()["after_restart"] = t.after_restart;
    }
    json pj = {{"path", p.name},
               {"engine_command", p.engine_command},
               {"summary", summary_json(p.summary)},
               {"wall_s", p.wall_s},
               {"stale_connection_retries", p.stale_retries},
               {"turns", turns}};
    if (restarts) {
      pj["summary"]["restart_turns"] = p.summary.restart_turns;
      pj["summary"]["after_restart"] = group_json(p.summary.after_restart);
      pj["summary"]["other_turns"] = group_json(p.summary.other_turns);
    }
    if (p.name == "gateway") {
      pj["sessions"] = p.sessions;
      pj["token_accounting"] = p.accounting;
      if (restarts) pj["saved_states"] = p.saved_states;
    }
    paths.push_back(std::move(pj));
  }
  json out = {{"bench", "replay"},
              {"trace", r.trace},
              {"options", r.options},
              {"paths", paths},
              {"wall_s", r.wall_s}};
  const PathResult* d = r.path("direct");
  const PathResult* g = r.path("gateway");
  if (d && g) out["gateway_vs_direct"] = compare_paths(*d, *g);
  return out;
}

Status write_replay(const ReplayReport& r, OutputDir& out) {
  const bool restarts = r.restart_every > 0;  // only then the after_restart column
  std::vector<std::string> header({"path", "turn", "status", "result", "stream", "messages", "request_bytes",
                                   "ttft_ms", "total_ms", "prompt_tokens", "cached_tokens",
                                   "prefilled_tokens", "engine_processed_tokens", "engine_cached_tokens",
                                   "compactions", "error"});
  if (restarts) header.insert(header.end() - 1, "after_restart");
  CsvWriter csv(header);
  for (const auto& p : r.paths) {
    for (const auto& t : p.turns) {
      std::vector<std::string> row(
          {p.name, std::to_string(t.turn), std::to_string(t.status), failure_name(t.failure),
           t.stream ? "1" : "0", std::to_string(t.request_messages), std::to_string(t.request_bytes),
           t.ttft_ms < 0 ? "" : format_number(t.ttft_ms, 1), format_number(t.total_ms, 1),
           std::to_string(t.prompt_tokens), std::to_string(t.cached_tokens),
           std::to_string(t.prefilled_tokens), format_number(t.engine_processed, 0),
           format_number(t.engine_cached, 0), compaction_text(t.compactions), t.error.substr(0, 200)});
      if (restarts) row.insert(row.end() - 1, t.after_restart ? "1" : "0");
      csv.row(row);
    }
  }
  KV_TRY(out.write("replay.csv", csv.text()));
  KV_TRY(out.write("replay.json", util::json_text(to_json(r), 2) + "\n"));
  KV_TRY(out.write("replay.svg", chart(r)));
  return {};
}

std::string replay_text(const ReplayReport& r) {
  std::string s = fmt::format("replay of {} ({} turns, context {}{})\n", r.trace, r.options.value("turns", 0),
                              r.options.value("context", 0), r.options.value("live", false) ? ", live" : "");
  s += fmt::format("  {:<8} {:>5} {:>9} {:>13} {:>13} {:>10} {:>10} {:>10} {:>11} {:>12}\n", "path", "ok",
                   "failed", "prompt tok", "prefilled", "ratio", "TTFT p50", "TTFT p95", "TTFT total",
                   "compactions");
  for (const auto& p : r.paths) {
    const auto& m = p.summary;
    s += fmt::format("  {:<8} {:>5} {:>9} {:>13} {:>13} {:>10.3f} {:>9.2f}s {:>9.2f}s {:>10.1f}s {:>12}\n",
                     p.name, m.ok, m.turns - m.ok, m.prompt_tokens, m.prefilled_tokens, m.prefilled_ratio,
                     m.ttft_ms.p50 / 1000, m.ttft_ms.p95 / 1000, m.ttft_ms.sum / 1000, m.compactions);
  }
  for (const auto& p : r.paths) {
    const auto& m = p.summary;
    if (!m.failures.empty()) {
      std::string kinds;
      for (const auto& [k, n] : m.failures) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, k);
      s += fmt::format("  {} failures: {} (first at turn {})\n", p.name, kinds, m.first_failure_turn);
    }
    if (m.engine_cached_known) {
      s += fmt::format("  {} engine counters: {:.0f} prompt tokens computed, {:.0f} reused ({:.1f}% computed)\n",
                       p.name, m.engine_processed, m.engine_cached, 100.0 * m.engine_processed_ratio);
    } else {
      s += fmt::format("  {} engine counters: {:.0f} prompt tokens computed (this build does not count reuse)\n",
                       p.name, m.engine_processed);
    }
    if (p.name == "gateway") {
      s += fmt::format("  gateway sessions at the end: {}\n", p.sessions);
      if (p.accounting.is_object()) {
        s += fmt::format(
            "  gateway token accounting: {} exact counts, {} pieces tokenised, {:.1f} ms in all, {:.2f} ms per turn\n",
            p.accounting.value("exact_counts", uint64_t{0}), p.accounting.value("pieces_tokenized", uint64_t{0}),
            p.accounting.value("ms_total", 0.0), p.accounting.value("ms_per_turn", 0.0));
      }
    }
  }
  const PathResult* d = r.path("direct");
  const PathResult* g = r.path("gateway");
  if (d && g) {
    const json c = compare_paths(*d, *g);
    auto num = [](const json& v) {
      return v.is_number() ? fmt::format("{:.3f}", v.get<double>()) : std::string("n/a");
    };
    s += fmt::format(
        "  gateway/direct over the {} turns both answered: TTFT sum {}, TTFT p50 {}, prefilled {}\n",
        c["turns_both_answered"].get<size_t>(), num(c["ttft_sum_ratio"]), num(c["ttft_p50_ratio"]),
        num(c["prefilled_ratio"]));
  }
  s += restart_text(r);
  s += fmt::format("{:.1f} s\n", r.wall_s);
  return s;
}

}  // namespace kvgate::bench
