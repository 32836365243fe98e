// The files and the text summary of kvgate bench prefill.
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "bench/csv.h"
#include "bench/prefill.h"
#include "bench/svg_chart.h"
#include "util/json.h"
#include "util/units.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string chart(const PrefillReport& r) {
  SvgChart c;
  c.title = "Prefill throughput against context";
  c.note = fmt::format("cache disabled, median of {} run{} per size; {}", r.options.reps,
                       r.options.reps == 1 ? "" : "s", r.cliff.explanation);
  c.x_label = "prompt tokens (context in use)";
  c.y_label = "prefill tokens/s";
  c.log_x = true;
  c.x_format = AxisFormat::kTokens;
  SvgSeries measured{.label = "measured (median)", .color = "#1f77b4"};
  SvgSeries runs{.label = "each run", .color = "#9ecae1", .line = false};
  for (const auto& p : r.points) {
    measured.x.push_back(static_cast<double>(p.size));
    measured.y.push_back(p.tokens_per_s);
  }
  for (const auto& run : r.runs) {
    runs.x.push_back(static_cast<double>(run.size));
    runs.y.push_back(run.tokens_per_s);
  }
  if (r.options.reps > 1) c.series.push_back(std::move(runs));
  c.series.push_back(std::move(measured));
  if (r.cliff.trend && !r.points.empty()) {
    SvgSeries trend{.label = r.cliff.cliff ? "trend of the sizes before the cliff"
                                           : "trend (time per token linear in context)",
                    .color = "#7f7f7f",
                    .dashed = true,
                    .points = false};
    for (const auto& p : r.points) {
      trend.x.push_back(static_cast<double>(p.size));
      trend.y.push_back(r.cliff.trend->tokens_per_s(p.size));
    }
    c.series.push_back(std::move(trend));
  }
  if (r.cliff.cliff) {
    const uint64_t at = r.cliff.sorted[*r.cliff.cliff].tokens;
    c.markers.push_back({.x = static_cast<double>(at), .label = "cliff: " + util::format_tokens(at)});
  }
  if (r.cliff.safe_cap_tokens > 0) {
    c.markers.push_back({.x = static_cast<double>(r.cliff.safe_cap_tokens),
                         .label = "safe cap " + std::to_string(r.cliff.safe_cap_tokens),
                         .color = "#2ca02c"});
  }
  return render_svg(std::span<const SvgChart>(&c, 1));
}

}  // namespace

json to_json(const PrefillReport& r) {
  json points = json::array();
  for (const auto& p : r.points) {
    points.push_back({{"tokens", p.size},
                      {"runs", p.reps},
                      {"tokens_per_s", p.tokens_per_s},
                      {"tokens_per_s_min", p.tokens_per_s_min},
                      {"tokens_per_s_max", p.tokens_per_s_max},
                      {"prompt_ms", p.prompt_ms},
                      {"trend_tokens_per_s", number_or_null(p.trend_tokens_per_s)}});
  }
  json runs = json::array();
  for (const auto& x : r.runs) {
    runs.push_back({{"tokens", x.size},
                    {"run", x.rep + 1},
                    {"prompt_tokens", x.prompt_tokens},
                    {"cached_tokens", x.cached_tokens},
                    {"prompt_ms", x.prompt_ms},
                    {"tokens_per_s", x.tokens_per_s},
                    {"wall_ms", x.wall_ms}});
  }
  json cache = nullptr;
  if (r.cache.ran) {
    cache = {{"passed", r.cache.passed},
             {"first_prompt_tokens", r.cache.first_prompt_tokens},
             {"second_prompt_tokens", r.cache.second_prompt_tokens},
             {"second_cached_tokens", r.cache.second_cached_tokens},
             {"detail", r.cache.detail}};
  }
  return {{"bench", "prefill"},
          {"engine", r.engine},
          {"options",
           {{"sizes", r.options.sizes},
            {"reps", r.options.reps},
            {"cliff_fraction", r.options.cliff.fraction},
            {"cap_fraction", r.options.cliff.cap_fraction},
            {"seed", r.options.seed}}},
          {"points", points},
          {"runs", runs},
          {"cliff", to_json(r.cliff)},
          {"cache_check", cache},
          {"notes", r.notes},
          {"wall_s", r.wall_s}};
}

Status write_prefill(const PrefillReport& r, OutputDir& out) {
  CsvWriter points({"tokens", "runs", "tokens_per_s", "tokens_per_s_min", "tokens_per_s_max", "prompt_ms",
                    "trend_tokens_per_s", "below_trend"});
  for (size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    const bool cliff = r.cliff.cliff && *r.cliff.cliff == i;
    points.row({std::to_string(p.size), std::to_string(p.reps), format_number(p.tokens_per_s, 1),
                format_number(p.tokens_per_s_min, 1), format_number(p.tokens_per_s_max, 1),
                format_number(p.prompt_ms, 1), format_number(p.trend_tokens_per_s, 1), cliff ? "cliff" : ""});
  }
  CsvWriter runs({"tokens", "run", "prompt_tokens", "cached_tokens", "prompt_ms", "tokens_per_s", "wall_ms"});
  for (const auto& x : r.runs) {
    runs.row({std::to_string(x.size), std::to_string(x.rep + 1), std::to_string(x.prompt_tokens),
              std::to_string(x.cached_tokens), format_number(x.prompt_ms, 2),
              format_number(x.tokens_per_s, 1), format_number(x.wall_ms, 2)});
  }
  KV_TRY(out.write("prefill.csv", points.text()));
  KV_TRY(out.write("prefill_runs.csv", runs.text()));
  KV_TRY(out.write("prefill.json", util::json_text(to_json(r), 2) + "\n"));
  KV_TRY(out.write("prefill.svg", chart(r)));
  return {};
}

std::string prefill_text(const PrefillReport& r) {
  std::string s = fmt::format(
      "prefill throughput, cache disabled, median of {} run{} per size ({})\n", r.options.reps,
      r.options.reps == 1 ? "" : "s",
      (r.engine.is_object() ? r.engine.value("url", std::string("engine")) : std::string("engine")));
  s += fmt::format("  {:>8}  {:>10}  {:>10}  {:>10}  {:>11}  {:>10}\n", "tokens", "tokens/s", "min", "max",
                   "prompt ms", "trend");
  for (size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    s += fmt::format("  {:>8}  {:>10.1f}  {:>10.1f}  {:>10.1f}  {:>11.1f}  {:>10}{}\n", p.size,
                     p.tokens_per_s, p.tokens_per_s_min, p.tokens_per_s_max, p.prompt_ms,
                     format_number(p.trend_tokens_per_s, 1),
                     r.cliff.cliff && *r.cliff.cliff == i ? "  <- cliff" : "");
  }
  s += r.cliff.explanation + "\n";
  if (r.cache.ran)
    s += fmt::format("second-turn cache check: {} ({})\n", r.cache.passed ? "pass" : "FAIL", r.cache.detail);
  for (const auto& n : r.notes) s += "note: " + n + "\n";
  s += fmt::format("{:.1f} s\n", r.wall_s);
  return s;
}

Result<json> load_prefill_summary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("{}: cannot read it", path));
  std::ostringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("bench", "") != "prefill" || !j.contains("points") ||
      !j["points"].is_array()) {
    return Error(fmt::format("{}: not the prefill.json of `kvgate bench prefill`", path));
  }
  json points = json::array();
  for (const auto& p : j["points"]) {
    if (!p.is_object() || !p.contains("tokens") || !p["tokens"].is_number() || !p.contains("tokens_per_s") ||
        !p["tokens_per_s"].is_number()) {
      return Error(fmt::format("{}: a point without tokens and tokens_per_s", path));
    }
    points.push_back({{"tokens", p["tokens"]},
                      {"tokens_per_s", p["tokens_per_s"]},
                      {"trend_tokens_per_s", p.value("trend_tokens_per_s", json())}});
  }
  const json cliff = j.value("cliff", json::object());
  return json{{"file", path},
              {"engine", j.value("engine", json())},
              {"points", points},
              {"cliff",
               {{"cliff_tokens", cliff.is_object() ? cliff.value("cliff_tokens", json()) : json()},
                {"safe_cap_tokens", cliff.is_object() ? cliff.value("safe_cap_tokens", json()) : json()},
                {"explanation", cliff.is_object() ? cliff.value("explanation", json()) : json()}}}};
}

}  // namespace kvgate::bench
