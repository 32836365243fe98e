#include "kvstate/slot_tenants.h"

#include <fmt/format.h>

#include "util/json.h"

namespace kvgate::gateway {

using nlohmann::json;

bool SlotTenants::foreign(int slot, const std::string& scope) const {
  if (!isolating_) return false;
  std::lock_guard lock(mu_);
  if (slot < 0 || static_cast<size_t>(slot) >= scope_.size()) return true;
  const auto& held = scope_[static_cast<size_t>(slot)];
  return !held || *held != scope;
}

void SlotTenants::hold(int slot, const std::string& scope) {
  if (!isolating_) return;
  std::lock_guard lock(mu_);
  if (slot >= 0 && static_cast<size_t>(slot) < scope_.size()) scope_[static_cast<size_t>(slot)] = scope;
}

void SlotTenants::forget(int slot) {
  std::lock_guard lock(mu_);
  if (slot >= 0 && static_cast<size_t>(slot) < scope_.size()) scope_[static_cast<size_t>(slot)].reset();
}

const char* slot_clear_name(SlotClear how) { return how == SlotClear::kErased ? "erase" : "overwrite"; }

Result<SlotClear> clear_slot(Upstream& upstream, int slot) {
  constexpr auto kTimeout = std::chrono::seconds(30);
  auto erased = upstream.call("POST", fmt::format("/slots/{}?action=erase", slot), "{}", kTimeout);
  if (erased.ok() && erased->status == 200) return SlotClear::kErased;
  // No slot actions on this engine: one token evaluated from position 0 replaces the slot's
  // content (cache_prompt false: nothing of it is reused).
  const json overwrite = {
      {"prompt", " "}, {"n_predict", 1}, {"id_slot", slot}, {"cache_prompt", false}, {"temperature", 0}};
  auto written = upstream.call("POST", "/completion", util::json_text(overwrite), kTimeout);
  if (written.ok() && written->status == 200) return SlotClear::kOverwritten;
  const std::string why = !written.ok() ? written.error().message
                                        : fmt::format("the engine answered {}: {}", written->status,
                                                      written->body.substr(0, 200));
  return Error(fmt::format("slot {} could not be cleared: {}", slot, why));
}

}  // namespace kvgate::gateway
