// ResponseStore: the OpenAI Responses answers kvgate keeps so that a request can continue
// from one by `previous_response_id` (and GET /v1/responses/{id} can return it). Each entry
// holds the response object and the conversation's chat messages after it (without the
// instructions, which the API does not carry over), under the key scope that made it.
//
// The newest `max_in_memory` are kept in memory; with a session store attached
// (Gateway::open_store) every response is also written to its `responses` table, which keeps
// the newest `keep_on_disk`, so a continuation works after kvgate restarts.
//
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "session/session_store.h"

namespace kvgate::gateway {

class ResponseStore {
 public:
  explicit ResponseStore(size_t max_in_memory = 2048, int64_t keep_on_disk = 20000)
      : max_in_memory_(max_in_memory), keep_on_disk_(keep_on_disk) {}

  // Write-through to `store` from now on (it outlives this object). The first store attached
  // stays (gateways of one fleet share this object, and the first to open a store writes it).
  void attach(session::SessionStore* store);
  // Keeps `r` under `id`; a store that fails to save is logged (the memory copy remains).
  void put(const std::string& id, session::StoredResponse r);
  // The response `id` made with `scope`; nullopt when unknown or made with another scope.
  std::optional<session::StoredResponse> get(const std::string& id, const std::string& scope);

 private:
  void remember(const std::string& id, session::StoredResponse r);  // REQUIRES: mu_ held

  const size_t max_in_memory_;
  const int64_t keep_on_disk_;
  std::mutex mu_;
  session::SessionStore* store_ = nullptr;                            // guarded by mu_
  std::unordered_map<std::string, session::StoredResponse> entries_;  // guarded by mu_
  std::deque<std::string> order_;                                     // guarded by mu_; oldest first
};

}  // namespace kvgate::gateway
