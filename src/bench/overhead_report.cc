// The files and the text summary of kvgate bench overhead.
#include <algorithm>

#include <fmt/format.h>

#include "bench/csv.h"
#include "bench/overhead.h"
#include "bench/svg_chart.h"
#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

// The empirical distribution of `values` as a series: x = value, y = percentile.
SvgSeries cdf(std::string label, std::string color, std::vector<double> values) {
  std::sort(values.begin(), values.end());
  SvgSeries s{.label = std::move(label), .color = std::move(color), .points = values.size() <= 60};
  for (size_t i = 0; i < values.size(); ++i) {
    s.x.push_back(values[i]);
    s.y.push_back(
        values.size() == 1 ? 100.0 : 100.0 * static_cast<double>(i) / static_cast<double>(values.size() - 1));
  }
  return s;
}

std::string chart(const OverheadReport& r) {
  std::vector<SvgChart> panels;
  for (const auto& c : r.cases) {
    SvgChart p{.title = fmt::format("Latency of the {} request ({} bytes, {} prompt tokens)", c.name,
                                    c.request_bytes, c.prompt_tokens),
               .note = fmt::format("gateway adds p50 {:.2f} ms, p99 {:.2f} ms (paired, {} pairs)",
                                   c.added.p50, c.added.p99, c.added.n),
               .x_label = "latency (ms)",
               .y_label = "percentile",
               .y_min = 0,
               .y_max = 100};
    p.series.push_back(cdf("direct", "#d62728", c.direct_ms));
    p.series.push_back(cdf("through kvgate", "#1f77b4", c.gateway_ms));
    panels.push_back(std::move(p));
  }
  if (r.stream && !r.stream->relay_us.empty()) {
    SvgChart p{.title = "Relay delay per SSE event through kvgate",
               .note = fmt::format("{} events in {} streams; p50 {:.0f} us, p99 {:.0f} us", r.stream->relay.n,
                                   r.stream->streams, r.stream->relay.p50, r.stream->relay.p99),
               .x_label = "delay (microseconds)",
               .y_label = "percentile",
               .y_min = 0,
               .y_max = 100};
    p.series.push_back(cdf("event relay delay", "#1f77b4", r.stream->relay_us));
    panels.push_back(std::move(p));
  }
  return render_svg(panels, 880, 340);
}

json case_json(const LatencyCase& c) {
  return {{"name", c.name},
          {"request_bytes", c.request_bytes},
          {"prompt_tokens", c.prompt_tokens},
          {"pairs", c.added_ms.size()},
          {"uncached_pairs", c.uncached_pairs},
          {"direct_ms", to_json(c.direct)},
          {"gateway_ms", to_json(c.gateway)},
          {"added_ms", to_json(c.added)}};
}

}  // namespace

json to_json(const OverheadReport& r) {
  json cases = json::array();
  for (const auto& c : r.cases) cases.push_back(case_json(c));
  json stream = nullptr;
  if (r.stream) {
    const auto& s = *r.stream;
    stream = {{"streams", s.streams},
              {"events_per_stream", s.events_per_stream},
              {"relay_us", to_json(s.relay)},
              {"done_ms", to_json(s.done)},
              {"added_ms", to_json(s.added)},
              {"direct_ms", to_json(summarize(s.direct_ms))},
              {"gateway_ms", to_json(summarize(s.gateway_ms))},
              {"unmatched_events", s.unmatched}};
  }
  return {{"bench", "overhead"},
          {"engine", r.engine},
          {"options",
           {{"warmup", r.options.warmup},
            {"reps", r.options.reps},
            {"large_bytes", r.options.large_bytes},
            {"large_reps", r.options.large_reps},
            {"stream_tokens", r.options.stream_tokens},
            {"stream_reps", r.options.stream_reps}}},
          {"cases", cases},
          {"stream", stream},
          {"notes", r.notes},
          {"wall_s", r.wall_s}};
}

Status write_overhead(const OverheadReport& r, OutputDir& out) {
  CsvWriter pairs({"case", "pair", "direct_ms", "gateway_ms", "added_ms"});
  for (const auto& c : r.cases) {
    for (size_t i = 0; i < c.added_ms.size(); ++i) {
      pairs.row({c.name, std::to_string(i + 1), format_number(c.direct_ms[i], 3),
                 format_number(c.gateway_ms[i], 3), format_number(c.added_ms[i], 3)});
    }
  }
  if (r.stream) {
    for (size_t i = 0; i < r.stream->direct_ms.size(); ++i) {
      pairs.row({"stream", std::to_string(i + 1), format_number(r.stream->direct_ms[i], 3),
                 format_number(r.stream->gateway_ms[i], 3),
                 format_number(r.stream->gateway_ms[i] - r.stream->direct_ms[i], 3)});
    }
  }
  KV_TRY(out.write("overhead.csv", pairs.text()));
  if (r.stream) {
    CsvWriter events({"event", "relay_us"});
    for (size_t i = 0; i < r.stream->relay_us.size(); ++i) {
      events.row({std::to_string(i + 1), format_number(r.stream->relay_us[i], 1)});
    }
    KV_TRY(out.write("overhead_events.csv", events.text()));
  }
  KV_TRY(out.write("overhead.json", util::json_text(to_json(r), 2) + "\n"));
  KV_TRY(out.write("overhead.svg", chart(r)));
  return {};
}

std::string overhead_text(const OverheadReport& r) {
  std::string s = fmt::format(
      "gateway overhead ({}, paired requests, alternating order)\n",
      (r.engine.is_object() ? r.engine.value("url", std::string("engine")) : std::string("engine")));
  s += fmt::format("  {:<18} {:>9} {:>7} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "request", "bytes", "pairs",
                   "direct p50", "kvgate p50", "added p50", "added p99", "added mean");
  for (const auto& c : r.cases) {
    s += fmt::format("  {:<18} {:>9} {:>7} {:>9.3f}ms {:>9.3f}ms {:>9.3f}ms {:>9.3f}ms {:>9.3f}ms\n", c.name,
                     c.request_bytes, c.added.n, c.direct.p50, c.gateway.p50, c.added.p50, c.added.p99,
                     c.added.mean);
  }
  if (r.stream) {
    const auto& st = *r.stream;
    s += fmt::format(
        "  SSE relay: {:.0f} events per stream, {} streams: per event p50 {:.0f} us, p99 {:.0f} us; "
        "final [DONE] (sent after the session is saved) p50 {:.2f} ms after the engine's; whole stream "
        "added p50 {:.2f} ms\n",
        st.events_per_stream, st.streams, st.relay.p50, st.relay.p99, st.done.p50, st.added.p50);
  }
  for (const auto& n : r.notes) s += "note: " + n + "\n";
  s += fmt::format("{:.1f} s\n", r.wall_s);
  return s;
}

}  // namespace kvgate::bench
