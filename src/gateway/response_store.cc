#include "gateway/response_store.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "util/log.h"

namespace kvgate::gateway {

using nlohmann::json;

void ResponseStore::attach(session::SessionStore* store) {
  std::lock_guard lock(mu_);
  if (!store_) store_ = store;
}

void ResponseStore::remember(const std::string& id, session::StoredResponse r) {
  const size_t bytes = r.bytes();
  if (auto it = entries_.find(id); it != entries_.end()) {
    bytes_ -= it->second.bytes();
    it->second = std::move(r);
  } else {
    entries_.emplace(id, std::move(r));
    order_.push_back(id);
  }
  bytes_ += bytes;
  while (!order_.empty() && (order_.size() > limits_.max_in_memory || bytes_ > limits_.memory_bytes)) {
    if (auto it = entries_.find(order_.front()); it != entries_.end()) {
      bytes_ -= it->second.bytes();
      entries_.erase(it);
    }
    order_.pop_front();
  }
}

void ResponseStore::put(const std::string& id, session::StoredResponse r) {
  std::lock_guard lock(mu_);
  if (store_ != nullptr) {
    if (auto saved = store_->save_response(id, r, limits_.disk); !saved.ok()) {
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

Result<std::optional<json>> ResponseStore::history(const std::string& id, const std::string& scope) {
  std::vector<std::string> texts;  // newest first
  std::string at = id;
  for (size_t depth = 0;; ++depth) {
    if (depth >= limits_.max_depth) {
      return Error(fmt::format("the conversation of {} chains more than {} responses; start a new one with the "
                               "whole input instead of previous_response_id",
                               id.substr(0, 200), limits_.max_depth));
    }
    auto r = get(at, scope);
    if (!r) {
      if (depth == 0) return std::optional<json>();
      return Error(fmt::format("response {} continues {}, which is no longer stored (the oldest responses are "
                               "dropped beyond the store's budget); send the whole input instead",
                               id.substr(0, 200), at.substr(0, 200)));
    }
    texts.push_back(std::move(r->messages));
    if (r->parent.empty()) break;
    at = std::move(r->parent);
  }
  json out = json::array();
  for (auto it = texts.rbegin(); it != texts.rend(); ++it) {
    json part = json::parse(*it, nullptr, false);
    if (!part.is_array()) return Error("the stored conversation of " + id.substr(0, 200) + " is unreadable");
    for (auto& m : part) out.push_back(std::move(m));
  }
  return std::optional<json>(std::move(out));
}

}  // namespace kvgate::gateway
