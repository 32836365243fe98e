// Router: which upstream engine (a llama-server) serves a conversation, when kvgate fronts
// several of them.
//
// An engine holds the KV cache of the conversations it served, so moving a conversation
// costs a full prefill (or a KV restore). A round-robin balancer would pay that on almost
// every turn; the Router keeps each conversation on one engine and spreads new ones.
//
// Rules:
//  1. Affinity. A conversation (a key: kvgate's session id) pinned to an upstream that is up
//     stays there, however loaded it is.
//  2. Placement of a new conversation: consistent hashing with bounded loads (Mirrokni,
//     Thorup, Zadimoghaddam, "Consistent Hashing with Bounded Loads"). Each upstream has
//     round(virtual_points × weight) points on a 64-bit ring, hashed from its name (XXH3,
//     stable across builds and machines), so placement does not depend on the order the
//     upstreams are listed and adding one moves few first choices. The key hashes to a point;
//     the walk goes clockwise to the first upstream that is up and whose load is below its
//     capacity
//         ceil(load_factor × (L + 1) × weight / W)
//     where L is the load (conversations pinned) on the upstreams that are up and W their
//     total weight. With equal weights that is ceil(c × (L + 1) / healthy_count). Because the
//     capacities of the up upstreams add up to at least L + 1, the walk always finds one
//     (load_factor is at least 1); if rounding ever failed that, the least loaded per unit
//     weight is taken.
//  3. Health, with hysteresis, on the caller's clock (no function reads a real clock):
//     failures_to_down consecutive failures (request or probe outcomes) take an upstream down,
//     and so does set_down() at once ("the process died"). A down upstream comes back on a
//     success reported at least rejoin_after after it went down; a success sooner only resets
//     the failure count, and a failure while down restarts the wait, so an upstream that flaps
//     is kept out until it has stayed quiet for rejoin_after.
//  4. Failover. A conversation whose upstream is down is placed again by rule 2 among those
//     that are up; place() reports where it came from (the gateway then restores or
//     re-prefills its KV). It is pinned to its new upstream: when the old one rejoins it does
//     not move back (another prefill); the rejoined upstream, nearly empty, is under its
//     capacity while the others are over theirs, so it takes the new conversations first.
//  5. No upstream up: place() gives nothing (the gateway answers 503) and conversations stay
//     pinned, so each returns to its own upstream if that one comes back first.
//  6. forget() unpins a conversation (its session was evicted), lowering that load.
//
// Upstreams are named by their index in the list given to the constructor; an index out of
// range is ignored (or answers "down", "nothing").
//
// Thread-safety: all public members are thread-safe (one internal mutex).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace kvgate::gateway {

using SteadyTime = std::chrono::steady_clock::time_point;

struct RouterOptions {
  double load_factor = 1.25;  // c in rule 2; below 1 counts as 1
  int failures_to_down = 2;   // below 1 counts as 1
  std::chrono::milliseconds rejoin_after{5000};
  int virtual_points = 64;  // ring points per unit weight (1 to 1024)
};

class Router {
 public:
  struct Upstream {
    std::string name;
    double weight = 1;  // relative capacity (e.g. its slot count); in (0, 1000]
  };

  // Whether `upstreams` is a valid list: non-empty, names non-empty and unique, weights in
  // (0, 1000]. The error names the entry at fault.
  static Status check(const std::vector<Upstream>& upstreams);

  // REQUIRES: check(upstreams).ok(). (Otherwise it still works: a weight out of range counts
  // as 1 or 1000, and an empty list never places anything.) All upstreams start up.
  explicit Router(std::vector<Upstream> upstreams, RouterOptions options = {});
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  struct Placement {
    size_t upstream = 0;
    bool is_new = false;               // the conversation was not pinned before
    std::optional<size_t> moved_from;  // failover: the down upstream it was pinned to
    bool moved() const { return moved_from.has_value(); }
  };
  // Where `conversation` goes now, pinning it there (rules 1, 2, 4). nullopt: no upstream is
  // up (rule 5); nothing changes.
  std::optional<Placement> place(const std::string& conversation);
  void forget(const std::string& conversation);
  std::optional<size_t> pinned(const std::string& conversation) const;

  // Outcomes of requests or probes, and a process known dead (rule 3).
  void report_success(size_t upstream, SteadyTime now);
  void report_failure(size_t upstream, SteadyTime now);
  void set_down(size_t upstream, SteadyTime now);
  bool up(size_t upstream) const;

  struct UpstreamStats {
    std::string name;
    double weight = 1;
    bool up = true;
    int consecutive_failures = 0;
    size_t pinned = 0;        // conversations pinned now (its load)
    uint64_t placements = 0;  // new conversations placed here
    uint64_t moves_in = 0;    // conversations moved here from a down upstream
    uint64_t moves_out = 0;   // conversations moved away while it was down
    uint64_t downs = 0;       // times it went down
  };
  std::vector<UpstreamStats> stats() const;  // in the constructor's order
  nlohmann::json to_json() const;

 private:
  struct State {
    UpstreamStats stats;
    SteadyTime down_since{};  // when it went down, or its last failure since
  };
  struct Point {
    uint64_t hash;
    size_t upstream;
  };
  void build_ring();
  // REQUIRES: mu_ held. The upstream rule 2 gives `conversation`; nullopt when none is up.
  std::optional<size_t> choose_locked(const std::string& conversation) const;
  std::optional<size_t> least_loaded_locked() const;  // REQUIRES: mu_ held
  void go_down_locked(State& s, SteadyTime now);      // REQUIRES: mu_ held
  State* state_locked(size_t upstream);               // REQUIRES: mu_ held; null if out of range

  const RouterOptions options_;
  std::vector<Point> ring_;  // immutable after construction; sorted by hash, then name
  mutable std::mutex mu_;
  std::vector<State> upstreams_;                  // guarded by mu_ (the list itself is fixed)
  std::unordered_map<std::string, size_t> pins_;  // guarded by mu_; conversation → upstream
};

}  // namespace kvgate::gateway
