#include "bench/prefill.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include <fmt/format.h>

#include "bench/engine_queries.h"
#include "bench/stats.h"
#include "util/json.h"
#include "util/units.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

// Common English words: their tokens are the alphabet of the random prompts.
constexpr std::string_view kWords =
    " the of and to in is that it was for on are as with his they at be this from have or by one had not but "
    "what "
    "all were when we there can an your which their said if do will each about how up out them then she many "
    "some "
    "so these would other into has more her two like him see time could no make than first been its who now "
    "people "
    "my made over did down only way find use may water long little very after words called just where most "
    "know "
    "cache prefill context memory token server model layer slot batch thread kernel buffer window";

Result<std::vector<int64_t>> token_alphabet(HttpClient& engine) {
  KV_ASSIGN_OR_RETURN(auto ids, tokenize(engine, kWords));
  std::set<int64_t> unique(ids.begin(), ids.end());
  if (unique.size() < 16)
    return Error("the engine's tokenizer returned too few distinct tokens for random prompts");
  return std::vector<int64_t>(unique.begin(), unique.end());
}

std::vector<int64_t> random_prompt(const std::vector<int64_t>& alphabet, uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::vector<int64_t> out(n);
  for (auto& t : out) t = alphabet[pick(rng)];
  return out;
}

struct Completion {
  uint64_t prompt_n = 0;
  uint64_t cache_n = 0;
  double prompt_ms = 0;
  double wall_ms = 0;
};

Result<Completion> complete(HttpClient& engine, const std::vector<int64_t>& prompt, bool cache) {
  const json body = {{"prompt", prompt}, {"n_predict", 1}, {"cache_prompt", cache}, {"temperature", 0}};
  const auto a = engine.post("/completion", util::json_text(body));
  if (a.status == 0)
    return Error(fmt::format("POST /completion ({} tokens): {}", prompt.size(), a.transport_error));
  if (a.status != 200) {
    return Error(fmt::format("POST /completion ({} tokens): HTTP {}: {}", prompt.size(), a.status,
                             a.body.substr(0, 300)));
  }
  const json j = a.json();
  if (!j.is_object() || !j.contains("timings") || !j["timings"].is_object()) {
    return Error("the engine's /completion answer has no timings (is this llama-server?)");
  }
  const json& t = j["timings"];
  Completion c;
  c.prompt_n = t.value("prompt_n", uint64_t{0});
  c.cache_n = t.value("cache_n", uint64_t{0});
  c.prompt_ms = t.value("prompt_ms", 0.0);
  c.wall_ms = a.ms;
  return c;
}

}  // namespace

Result<std::vector<uint64_t>> parse_context_sizes(std::string_view spec) {
  std::set<uint64_t> sizes;
  if (auto dots = spec.find(".."); dots != std::string_view::npos) {
    auto lo = util::parse_tokens(spec.substr(0, dots));
    auto hi = util::parse_tokens(spec.substr(dots + 2));
    if (!lo.ok() || !hi.ok() || *lo == 0 || *hi < *lo) {
      return Error(fmt::format("--ctx '{}': expected a range LOW..HIGH such as 4k..128k", spec));
    }
    sizes.insert(*lo);
    sizes.insert(*hi);
    for (uint64_t p = 1; p <= *hi && p < (uint64_t{1} << 40); p *= 2) {
      for (uint64_t v : {p, p + p / 2}) {
        if (v > *lo && v < *hi) sizes.insert(v);
      }
    }
  } else {
    size_t pos = 0;
    while (pos <= spec.size()) {
      size_t comma = spec.find(',', pos);
      if (comma == std::string_view::npos) comma = spec.size();
      auto v = util::parse_tokens(spec.substr(pos, comma - pos));
      if (!v.ok() || *v == 0) {
        return Error(fmt::format("--ctx '{}': '{}' is not a token count (e.g. 4096, 4k)", spec,
                                 spec.substr(pos, comma - pos)));
      }
      sizes.insert(*v);
      pos = comma + 1;
    }
  }
  return std::vector<uint64_t>(sizes.begin(), sizes.end());
}

void summarize_prefill(PrefillReport& report) {
  report.points.clear();
  std::vector<ThroughputPoint> tp;
  for (uint64_t size : report.options.sizes) {
    std::vector<double> tps, ms;
    for (const auto& r : report.runs) {
      if (r.size != size) continue;
      tps.push_back(r.tokens_per_s);
      ms.push_back(r.prompt_ms);
    }
    if (tps.empty()) continue;
    const Summary s = summarize(tps);
    PrefillPoint p{.size = size,
                   .reps = tps.size(),
                   .tokens_per_s = s.p50,
                   .tokens_per_s_min = s.min,
                   .tokens_per_s_max = s.max,
                   .prompt_ms = median(ms),
                   .trend_tokens_per_s = std::numeric_limits<double>::quiet_NaN()};
    report.points.push_back(p);
    tp.push_back({size, s.p50});
  }
  report.cliff = detect_cliff(tp, report.options.cliff);
  for (size_t i = 0; i < report.points.size() && i < report.cliff.trend_tokens_per_s.size(); ++i) {
    report.points[i].trend_tokens_per_s = report.cliff.trend_tokens_per_s[i];
  }
}

Result<PrefillReport> run_prefill(HttpClient& engine, const PrefillOptions& options,
                                  const ProgressFn& progress) {
  if (options.sizes.empty()) return Error("no context sizes to measure (--ctx)");
  if (options.reps < 1) return Error("--reps must be at least 1");
  const auto t0 = std::chrono::steady_clock::now();
  PrefillReport report;
  report.options = options;
  KV_ASSIGN_OR_RETURN(const uint64_t n_ctx, engine_context(engine));
  report.engine = {{"url", engine.endpoint().url()}, {"context_per_slot", n_ctx}};
  KV_ASSIGN_OR_RETURN(const auto alphabet, token_alphabet(engine));

  // A prompt of n tokens and one generated token must fit: the engine refuses n >= n_ctx.
  const uint64_t max_prompt = n_ctx > 8 ? n_ctx - 4 : 1;
  std::vector<uint64_t> sizes;
  for (uint64_t s : options.sizes) {
    const uint64_t m = std::min(s, max_prompt);
    if (m != s) {
      report.notes.push_back(
          fmt::format("{} tokens do not fit the engine's context ({}): measured {} instead", s, n_ctx, m));
    }
    if (std::find(sizes.begin(), sizes.end(), m) == sizes.end()) sizes.push_back(m);
  }
  report.options.sizes = sizes;
  const size_t total =
      sizes.size() * static_cast<size_t>(options.reps) + (options.cache_check_tokens > 0 ? 2 : 0) + 1;
  size_t done = 0;
  auto tick = [&](const std::string& label) {
    if (progress) progress(done, total, label);
  };

  tick("warm-up");
  KV_TRY(complete(engine, random_prompt(alphabet, std::min<uint64_t>(128, max_prompt), options.seed ^ 0x5eed),
                  false));
  ++done;

  if (options.cache_check_tokens > 0) {
    CacheCheck& cc = report.cache;
    cc.ran = true;
    const uint64_t first = std::min(options.cache_check_tokens, max_prompt > 64 ? max_prompt - 64 : 1);
    auto a = random_prompt(alphabet, first, options.seed ^ 0xcace);
    tick("cache check: first turn");
    KV_ASSIGN_OR_RETURN(Completion c1, complete(engine, a, true));
    ++done;
    auto more = random_prompt(alphabet, 64, options.seed ^ 0xcacf);
    a.insert(a.end(), more.begin(), more.end());
    tick("cache check: second turn");
    KV_ASSIGN_OR_RETURN(Completion c2, complete(engine, a, true));
    ++done;
    cc.first_prompt_tokens = c1.prompt_n + c1.cache_n;
    cc.second_prompt_tokens = c2.prompt_n + c2.cache_n;
    cc.second_cached_tokens = c2.cache_n;
    cc.passed = c2.cache_n + 1 >= first;
    cc.detail = fmt::format("second turn reused {} of {} prompt tokens (the first turn's prompt: {})",
                            c2.cache_n, cc.second_prompt_tokens, first);
  }

  for (uint64_t size : sizes) {
    for (int rep = 0; rep < options.reps; ++rep) {
      tick(fmt::format("prefill {} tokens, run {}/{}", size, rep + 1, options.reps));
      const uint64_t seed =
          options.seed * uint64_t{1000003} + size * uint64_t{131} + static_cast<uint64_t>(rep);
      KV_ASSIGN_OR_RETURN(Completion c, complete(engine, random_prompt(alphabet, size, seed), false));
      ++done;
      PrefillRun r{
          .size = size,
          .rep = rep,
          .prompt_tokens = c.prompt_n,
          .cached_tokens = c.cache_n,
          .prompt_ms = c.prompt_ms,
          .tokens_per_s = c.prompt_ms > 0 ? 1000.0 * static_cast<double>(c.prompt_n) / c.prompt_ms : 0,
          .wall_ms = c.wall_ms};
      if (c.cache_n > 0) {
        report.notes.push_back(
            fmt::format("{} tokens, run {}: the engine reused {} cached tokens despite cache_prompt=false",
                        size, rep + 1, c.cache_n));
      }
      report.runs.push_back(r);
    }
  }
  tick("done");
  summarize_prefill(report);
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace kvgate::bench
