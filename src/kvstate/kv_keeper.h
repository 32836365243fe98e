// Keeps conversations' engine state across engine restarts, kvgate restarts and slot
// contention: what a slot holds is saved to disk (KvFiles) when it is about to be lost or
// has grown enough since its last save, and restored into the slot a conversation's next
// turn goes to when that slot does not hold it; the engine's own prefix match then reuses it.
//
// Save points:
//   - before a slot is given to another conversation (its holder's state, unless saved since
//     its last turn);
//   - after a turn, when the state grew since the last save by `save_every_tokens`, or (0,
//     the default) by `min_growth_tokens` while a save costs at most `max_save_cost` of the
//     prefill a restore of it replaces — from the measured save time per token and the
//     measured prefill speed (on the pinned CPU engine about 1 us against 100 us per token,
//     so every turn is saved; a state too large for its disk is then saved only when it
//     loses its slot or kvgate stops);
//   - save_all(): at shutdown, every slot's unsaved state.
// Restore: before a turn whose slot does not hold its conversation (another holder, or the
// engine restarted since), the conversation's file is restored when it was saved under this
// engine and these settings, is intact, and holds a rendering of messages that the new view
// starts with (view_prefix_hash). Anything else is not restored: the turn is prefilled as
// without this feature. A failed save or restore only costs the optimisation.
//
// The engine writes and reads the files itself, so the folder must be its --slot-save-path
// on the same machine.
//
// Thread-safe; a slot is used by one request at a time (admission.h), and its save or
// restore runs in that request.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvstate/kv_files.h"
#include "metrics/metrics.h"
#include "upstream/upstream.h"
#include "util/result.h"

namespace kvgate::gateway {

struct KvOptions {
  std::filesystem::path dir;       // the engine's --slot-save-path; empty: off
  uint64_t disk_budget_bytes = 0;  // 0: off
  nlohmann::json identity = nlohmann::json::object();  // model, build, cache settings (KvFiles)
  uint64_t save_every_tokens = 0;  // 0: from the measured speeds (above)
  double max_save_cost = 0.05;
  uint64_t min_growth_tokens = 64;  // never save for less growth than this after a turn
  // Recurrent state cannot be cut back to a shorter prompt: after each turn the slot is made
  // to hold exactly the rendering the next request starts with (the view, the reply, the
  // next message's header), so that what is saved is a prefix of the next prompt. Hybrid and
  // recurrent models.
  bool exact_prefix = false;
  // The folders of the other engines of the same plan (kvgate up --engines). A session with no
  // state of its own takes, once, the largest state there that was saved in its key scope and
  // whose saved view the new view starts with: the conversation moved here from an engine
  // that went down.
  std::vector<std::filesystem::path> siblings;
  bool enabled() const { return !dir.empty() && disk_budget_bytes > 0; }
};

// Hash of what decides the rendering of the first `messages` view messages: those messages
// and the request's tools and template arguments.
uint64_t view_prefix_hash(const nlohmann::json& view, size_t messages, const nlohmann::json& body);

class KvKeeper {
 public:
  KvKeeper(KvOptions options, Upstream& upstream, Metrics& metrics, int slots);
  Status open();

  struct Prepared {
    bool restored = false;
    bool confirmed = false;  // restored, and the engine answered that it was (a restore
                             // replaces everything the slot held)
    uint64_t tokens = 0;  // restored
    double ms = 0;
  };
  // Before `session`'s request with `view` is sent on `slot` to the engine of `generation`;
  // `scope` is the session's key scope (a state of another engine is taken only in it).
  Prepared prepare(int slot, const std::string& session, uint64_t generation, const nlohmann::json& view,
                   const nlohmann::json& body, const std::string& scope = "");
  // The engine's figures of a turn.
  struct Turn {
    uint64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
    double prefill_ms_per_token = 0;  // the measured prefill speed
  };
  // After a turn that succeeded: the slot holds `view`'s rendering and the reply `reply`.
  void after_turn(int slot, const std::string& session, uint64_t generation, const nlohmann::json& view,
                  const nlohmann::json& body, const nlohmann::json& reply, const Turn& turn);
  // Saves every slot's state not saved since its last turn (shutdown).
  void save_all(uint64_t generation);
  // Before a request the engine may put in any slot (a raw completion): saves what is
  // unsaved, then takes every slot as holding nothing known.
  void before_foreign_use(uint64_t generation);
  // A session's saved state for status: tokens, bytes, last save and restore; null if none.
  nlohmann::json session_info(const std::string& session);
  // Gauges for /metrics (files, bytes on disk, budget).
  void gauges(std::string& out);

 private:
  struct Held {  // what a slot holds, as far as kvgate knows
    std::string session;
    std::string scope;
    uint64_t generation = 0;
    uint64_t prefix_hash = 0;
    uint64_t prefix_messages = 0;
    bool saved = true;           // nothing unsaved
    uint64_t restored_tokens = 0;  // restored before the turn now running
  };
  struct Activity {  // per session, for status
    int64_t last_save_ms = 0, last_restore_ms = 0;  // unix ms
    double save_ms = 0, restore_ms = 0;
    uint64_t restored_tokens = 0;
  };
  // Saves what `slot` holds (the engine's state) for `held.session`; false on failure.
  bool save(int slot, Held& held, const char* why);
  // Saves every slot's unsaved state of `generation`; `forget`: then takes each as holding nothing.
  void save_unsaved(uint64_t generation, const char* why, bool forget);
  bool should_save(uint64_t tokens, uint64_t growth, double prefill_ms_per_token) const;
  // The siblings' best state for a session with none (KvOptions::siblings), taken as its own.
  std::optional<KvFileRecord> adopt(const std::string& session, const std::string& scope,
                                    const nlohmann::json& view, const nlohmann::json& body);
  // exact_prefix: makes `slot` hold the rendering of view + reply up to the next message's
  // content; false when the engine could not.
  bool hold_next_prefix(int slot, const nlohmann::json& view, const nlohmann::json& body, const nlohmann::json& reply);
  std::chrono::milliseconds engine_timeout(uint64_t bytes) const;
  Activity& activity(const std::string& session);  // REQUIRES: activity_mu_ held

  KvOptions options_;
  Upstream& upstream_;
  Metrics& metrics_;
  std::unique_ptr<KvFiles> files_;
  std::vector<std::unique_ptr<std::mutex>> slot_mu_;
  std::vector<Held> held_;  // per slot; guarded by slot_mu_[slot]
  std::atomic<double> save_ms_per_token_{0};  // measured; 0 until the first save
  std::atomic<uint64_t> largest_state_bytes_{0};
  std::mutex activity_mu_;
  std::map<std::string, Activity> activity_;  // guarded by activity_mu_
};

}  // namespace kvgate::gateway
