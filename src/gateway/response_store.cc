#include "gateway/response_store.h"

#include "util/log.h"

namespace kvgate::gateway {

void ResponseStore::attach(session::SessionStore* store) {
  std::lock_guard lock(mu_);
  if (!store_) store_ = store;
}

void ResponseStore::remember(const std::string& id, session::StoredResponse r) {
  if (entries_.insert_or_assign(id, std::move(r)).second) order_.push_back(id);
  while (order_.size() > max_in_memory_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
}

void ResponseStore::put(const std::string& id, session::StoredResponse r) {
  std::lock_guard lock(mu_);
  if (store_ != nullptr) {
    if (auto saved = store_->save_response(id, r, keep_on_disk_); !saved.ok()) {
      util::log_event(util::LogLevel::kWarn, "response_not_saved",
                      {{"id", id}, {"error", saved.error().message()}});
    }
  }
  remember(id, std::move(r));
}

std::optional<session::StoredResponse> ResponseStore::get(const std::string& id, const std::string& scope) {
  std::lock_guard lock(mu_);
  std::optional<session::StoredResponse> found;
  if (auto it = entries_.find(id); it != entries_.end()) {
    found = it->second;
  } else if (store_ != nullptr) {
    auto loaded = store_->load_response(id);
    if (loaded.ok() && *loaded) {
      found = **loaded;
      remember(id, **loaded);
    }
  }
  if (found && found->scope != scope) return std::nullopt;  // another key's: as if unknown
  return found;
}

}  // namespace kvgate::gateway
