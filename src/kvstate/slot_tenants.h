// Which API key's content each engine slot holds, so that one key's request never reuses
// another key's cache (docs/GATEWAY.md, "Keys and the engine's cache").
//
// The engine reuses whatever a slot holds that a new prompt starts with, whoever sent it:
// key B sending key A's system prompt to a slot A used gets A's prefix from the cache (its
// cached_tokens and its shorter wait tell B what A's prompt says, a token at a time). With
// more than one key (`isolating`), kvgate records per slot the scope (the key's hash) whose
// content it sent there, and before a request of another scope goes to the slot, the slot
// either receives that scope's own saved state (kv_keeper.h: a restore replaces all the slot
// holds) or is cleared (clear_slot). A slot kvgate has not sent anything to since it started,
// or whose clearing failed, counts as holding another scope's content.
//
// With one key or none there is one scope: nothing is recorded and nothing cleared.
//
// Thread-safe; a slot is used by one request at a time (admission.h).
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "upstream/upstream.h"
#include "util/result.h"

namespace kvgate::gateway {

class SlotTenants {
 public:
  SlotTenants(int slots, bool isolating)
      : isolating_(isolating), scope_(static_cast<size_t>(slots > 0 ? slots : 1)) {}
  bool isolating() const { return isolating_; }
  // Whether `slot` may hold content of a scope other than `scope` (unknown content may).
  // Always false when not isolating.
  bool foreign(int slot, const std::string& scope) const;
  // `slot` now holds `scope`'s content only (nothing, or what `scope` sent).
  void hold(int slot, const std::string& scope);
  // What `slot` holds is not known (a clearing failed).
  void forget(int slot);

 private:
  const bool isolating_;
  mutable std::mutex mu_;
  std::vector<std::optional<std::string>> scope_;  // guarded by mu_; nullopt: unknown
};

// How a slot was cleared.
enum class SlotClear { kErased, kOverwritten };
const char* slot_clear_name(SlotClear how);

// Makes the engine's `slot` hold nothing another request could reuse: the slot erase action
// (POST /slots/N?action=erase), or where the engine has none (no --slot-save-path) a one-token
// completion on the slot without prompt caching, which throws out what it held. An error when
// neither worked (the slot's content is then unknown).
Result<SlotClear> clear_slot(Upstream& upstream, int slot);

}  // namespace kvgate::gateway
