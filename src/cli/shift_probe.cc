#include "cli/shift_probe.h"
#include "util/json.h"

#include <random>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvgate::cli {
namespace {

using nlohmann::json;

constexpr int kHead = 16;   // S
constexpr int kGap = 64;    // A, the part the second prompt deletes
constexpr const char* kWords[] = {"river", "copper", "lantern", "orchard", "signal", "harbor", "meadow",
                                  "ledger", "window", "thunder", "pepper", "canyon", "marble", "violet",
                                  "compass", "falcon", "garden", "silver", "timber", "quartz"};

// Varied text of at least `tokens` tokens on any vocabulary (about three words a clause).
std::string probe_text(int tokens) {
  std::random_device rd;
  std::string text = fmt::format("kvgate start-up probe {:08x}{:08x}.", rd(), rd());
  constexpr int n = static_cast<int>(std::size(kWords));
  for (int i = 0; i < tokens; ++i) {
    text += fmt::format(" {} {} {},", kWords[i % n], kWords[(i * 7 + 3) % n], i);
  }
  return text;
}

std::optional<json> post(httplib::Client& c, const std::string& path, const json& body, std::string& why) {
  auto r = c.Post(path, util::json_text(body), "application/json");
  if (!r) {
    why = fmt::format("POST {}: {}", path, httplib::to_string(r.error()));
    return std::nullopt;
  }
  json j = json::parse(r->body, nullptr, false);
  if (r->status != 200 || !j.is_object()) {
    why = fmt::format("POST {} answered {}", path, r->status);
    return std::nullopt;
  }
  return j;
}

// The tokens a /completion computed, from its timings (both forks report prompt_n).
std::optional<int> computed(const json& answer) {
  const json t = answer.value("timings", json::object());
  if (!t.is_object() || !t.contains("prompt_n") || !t["prompt_n"].is_number_integer()) return std::nullopt;
  return t["prompt_n"].get<int>();
}

}  // namespace

ShiftProbe probe_shifting(httplib::Client& server) {
  ShiftProbe p;
  server.set_read_timeout(300, 0);
  auto tokenized = post(server, "/tokenize", {{"content", probe_text(kHead + kGap + kShiftProbeChunk)}}, p.why);
  if (!tokenized) return p;
  const json all = tokenized->value("tokens", json::array());
  if (!all.is_array() || all.size() < static_cast<size_t>(kHead + kGap + kShiftProbeChunk)) {
    p.why = "its /tokenize gave too few tokens";
    return p;
  }
  const auto at = [&](int i) { return all.begin() + i; };
  const json first(at(0), at(kHead + kGap + kShiftProbeChunk));
  json second(at(0), at(kHead));
  second.insert(second.end(), at(kHead + kGap), at(kHead + kGap + kShiftProbeChunk));
  const json common = {{"n_predict", 1}, {"temperature", 0}, {"cache_prompt", true}, {"id_slot", 0}};
  json a = common;
  a["prompt"] = first;
  if (!post(server, "/completion", a, p.why)) return p;
  json b = common;
  b["prompt"] = second;
  auto answer = post(server, "/completion", b, p.why);
  if (!answer) return p;
  const auto n = computed(*answer);
  if (!n) {
    p.why = "its /completion reports no timings.prompt_n";
    return p;
  }
  p.second_prompt_tokens = static_cast<int>(second.size());
  p.second_computed = *n;
  p.shifts = *n < kShiftProbeChunk / 2;
  return p;
}

}  // namespace kvgate::cli
