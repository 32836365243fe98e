#include "fleet/router.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>
#include <xxhash.h>

namespace kvgate::gateway {

namespace {

constexpr double kMaxWeight = 1000;

RouterOptions normalised(RouterOptions o) {
  // std::max(1.0, NaN) is 1.0: a NaN load factor counts as 1 too.
  o.load_factor = std::max(1.0, o.load_factor);
  o.failures_to_down = std::max(1, o.failures_to_down);
  o.virtual_points = std::clamp(o.virtual_points, 1, 1024);
  o.rejoin_after = std::max(o.rejoin_after, std::chrono::milliseconds{0});
  return o;
}

bool valid_weight(double w) { return w > 0 && w <= kMaxWeight; }  // false for NaN

double normalised_weight(double w) {
  if (!(w > 0)) return 1;
  return std::min(w, kMaxWeight);
}

// XXH3's output is fixed by its specification, so a conversation lands on the same upstream
// whichever build or machine of kvgate places it (std::hash promises neither).
uint64_t hash_of(const std::string& s, uint64_t seed = 0) {
  return XXH3_64bits_withSeed(s.data(), s.size(), seed);
}

}  // namespace

Status Router::check(const std::vector<Upstream>& upstreams) {
  if (upstreams.empty()) return Error("no upstreams: the router needs at least one");
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < upstreams.size(); ++i) {
    const Upstream& u = upstreams[i];
    if (u.name.empty()) return Error(fmt::format("upstream {}: empty name", i));
    if (!names.insert(u.name).second) {
      return Error(fmt::format("upstream {} (\"{}\"): duplicate name (names place conversations on the ring)",
                               i, u.name));
    }
    if (!valid_weight(u.weight)) {
      return Error(
          fmt::format("upstream {} (\"{}\"): weight {} is not in (0, {}]", i, u.name, u.weight, kMaxWeight));
    }
  }
  return util::ok_status();
}

Router::Router(std::vector<Upstream> upstreams, RouterOptions options) : options_(normalised(options)) {
  upstreams_.reserve(upstreams.size());
  for (Upstream& u : upstreams) {
    State s;
    s.stats.name = std::move(u.name);
    s.stats.weight = normalised_weight(u.weight);
    upstreams_.push_back(std::move(s));
  }
  build_ring();
}

void Router::build_ring() {
  for (size_t i = 0; i < upstreams_.size(); ++i) {
    const UpstreamStats& u = upstreams_[i].stats;
    const long points = std::max(1L, std::lround(options_.virtual_points * u.weight));
    for (long p = 0; p < points; ++p) ring_.push_back({hash_of(u.name, static_cast<uint64_t>(p)), i});
  }
  // Ties (two points with one hash) are broken by name, not index, so the ring is the same
  // whatever order the upstreams were listed in.
  std::sort(ring_.begin(), ring_.end(), [this](const Point& a, const Point& b) {
    if (a.hash != b.hash) return a.hash < b.hash;
    const std::string& na = upstreams_[a.upstream].stats.name;
    const std::string& nb = upstreams_[b.upstream].stats.name;
    return na != nb ? na < nb : a.upstream < b.upstream;
  });
}

std::optional<size_t> Router::choose_locked(const std::string& conversation) const {
  // L and W count only the upstreams that are up: the bound balances the ones that can
  // serve. A conversation being moved off a down upstream is not in L (its load is there).
  double weight_up = 0;
  size_t load_up = 0;
  for (const State& s : upstreams_) {
    if (!s.stats.up) continue;
    weight_up += s.stats.weight;
    load_up += s.stats.pinned;
  }
  if (weight_up <= 0) return std::nullopt;
  const double per_weight = options_.load_factor * static_cast<double>(load_up + 1) / weight_up;

  const uint64_t h = hash_of(conversation);
  const auto first =
      std::lower_bound(ring_.begin(), ring_.end(), h, [](const Point& p, uint64_t v) { return p.hash < v; });
  const size_t start = static_cast<size_t>(first - ring_.begin());
  for (size_t k = 0; k < ring_.size(); ++k) {
    const Point& p = ring_[(start + k) % ring_.size()];  // clockwise, wrapping past the top
    const UpstreamStats& u = upstreams_[p.upstream].stats;
    const double capacity = std::ceil(per_weight * u.weight);
    if (u.up && static_cast<double>(u.pinned) < capacity) return p.upstream;
  }
  return least_loaded_locked();  // unreachable in exact arithmetic (see the header)
}

std::optional<size_t> Router::least_loaded_locked() const {
  std::optional<size_t> best;
  double best_load = 0;
  for (size_t i = 0; i < upstreams_.size(); ++i) {
    const UpstreamStats& u = upstreams_[i].stats;
    if (!u.up) continue;
    const double load = static_cast<double>(u.pinned) / u.weight;
    if (!best || load < best_load) {
      best = i;
      best_load = load;
    }
  }
  return best;
}

std::optional<Router::Placement> Router::place(const std::string& conversation) {
  std::lock_guard lock(mu_);
  const auto it = pins_.find(conversation);
  if (it != pins_.end() && upstreams_[it->second].stats.up) return Placement{it->second, false, std::nullopt};
  const std::optional<size_t> to = choose_locked(conversation);
  if (!to) return std::nullopt;  // pins stay as they are (rule 5)
  UpstreamStats& dst = upstreams_[*to].stats;
  ++dst.pinned;
  if (it == pins_.end()) {
    pins_.emplace(conversation, *to);
    ++dst.placements;
    return Placement{*to, true, std::nullopt};
  }
  const size_t from = it->second;
  UpstreamStats& src = upstreams_[from].stats;
  --src.pinned;
  ++src.moves_out;
  ++dst.moves_in;
  it->second = *to;
  return Placement{*to, false, from};
}

void Router::forget(const std::string& conversation) {
  std::lock_guard lock(mu_);
  const auto it = pins_.find(conversation);
  if (it == pins_.end()) return;
  --upstreams_[it->second].stats.pinned;
  pins_.erase(it);
}

std::optional<size_t> Router::pinned(const std::string& conversation) const {
  std::lock_guard lock(mu_);
  const auto it = pins_.find(conversation);
  if (it == pins_.end()) return std::nullopt;
  return it->second;
}

Router::State* Router::state_locked(size_t upstream) {
  return upstream < upstreams_.size() ? &upstreams_[upstream] : nullptr;
}

void Router::go_down_locked(State& s, SteadyTime now) {
  if (s.stats.up) {
    s.stats.up = false;
    ++s.stats.downs;
    s.down_since = now;
    return;
  }
  // Already down: the wait for rejoining starts again. max(): reports from several threads
  // can arrive out of the order of their clocks, and an older one must not shorten the wait.
  s.down_since = std::max(s.down_since, now);
}

void Router::report_failure(size_t upstream, SteadyTime now) {
  std::lock_guard lock(mu_);
  State* s = state_locked(upstream);
  if (s == nullptr) return;
  ++s->stats.consecutive_failures;
  if (!s->stats.up || s->stats.consecutive_failures >= options_.failures_to_down) go_down_locked(*s, now);
}

void Router::report_success(size_t upstream, SteadyTime now) {
  std::lock_guard lock(mu_);
  State* s = state_locked(upstream);
  if (s == nullptr) return;
  s->stats.consecutive_failures = 0;
  if (!s->stats.up && now - s->down_since >= options_.rejoin_after) s->stats.up = true;
}

void Router::set_down(size_t upstream, SteadyTime now) {
  std::lock_guard lock(mu_);
  if (State* s = state_locked(upstream)) go_down_locked(*s, now);
}

bool Router::up(size_t upstream) const {
  std::lock_guard lock(mu_);
  return upstream < upstreams_.size() && upstreams_[upstream].stats.up;
}

std::vector<Router::UpstreamStats> Router::stats() const {
  std::lock_guard lock(mu_);
  std::vector<UpstreamStats> out;
  out.reserve(upstreams_.size());
  for (const State& s : upstreams_) out.push_back(s.stats);
  return out;
}

nlohmann::json Router::to_json() const {
  const std::vector<UpstreamStats> all = stats();
  nlohmann::json upstreams = nlohmann::json::array();
  size_t conversations = 0;
  for (const UpstreamStats& u : all) {
    conversations += u.pinned;
    upstreams.push_back({{"name", u.name},
                         {"weight", u.weight},
                         {"up", u.up},
                         {"consecutive_failures", u.consecutive_failures},
                         {"conversations", u.pinned},
                         {"placements", u.placements},
                         {"moves_in", u.moves_in},
                         {"moves_out", u.moves_out},
                         {"downs", u.downs}});
  }
  return {{"conversations", conversations},
          {"load_factor", options_.load_factor},
          {"failures_to_down", options_.failures_to_down},
          {"rejoin_after_ms", options_.rejoin_after.count()},
          {"virtual_points", options_.virtual_points},
          {"upstreams", std::move(upstreams)}};
}

}  // namespace kvgate::gateway
