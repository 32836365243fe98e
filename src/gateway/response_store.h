// ResponseStore: the OpenAI Responses answers kvgate keeps so that a request can continue
// from one by `previous_response_id` (and GET /v1/responses/{id} can return it). Each entry
// holds the response object and the chat messages its own request added (input and answer,
// without the instructions, which the API does not carry over), with a reference to the
// response it continued, under the key scope that made it. What is stored follows what
// clients send, not what they reference: a request of 100 bytes that continues a 1 MB
// conversation stores about 100 bytes plus the answer, and a chain of N steps stores each
// step once. history() puts a conversation together again along the parents, at most
// `max_depth` of them.
//
// Budgets (ResponseStoreLimits; the oldest go first): in memory the newest `max_in_memory`
// within `memory_bytes`; with a session store attached (Gateway::open_store) every response
// is also written to its `responses` table, which keeps the newest `disk.keep`, the newest of
// each key within `disk.scope_bytes` and of all within `disk.total_bytes`, so a continuation
// works after kvgate restarts. A continuation whose earlier response was evicted is refused
// with a message saying so.
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

#include <nlohmann/json.hpp>

#include "session/session_store.h"
#include "util/result.h"

namespace kvgate::gateway {

struct ResponseStoreLimits {
  size_t max_in_memory = 2048;
  size_t memory_bytes = 256ull << 20;
  session::ResponseBudget disk{.keep = 20000, .scope_bytes = 256ll << 20, .total_bytes = 1ll << 30};
  size_t max_depth = 1024;  // responses one conversation may chain
};

class ResponseStore {
 public:
  explicit ResponseStore(ResponseStoreLimits limits = {}) : limits_(limits) {}

  // Write-through to `store` from now on (it outlives this object). The first store attached
  // stays (gateways of one fleet share this object, and the first to open a store writes it).
  void attach(session::SessionStore* store);
  // Keeps `r` under `id`; a store that fails to save is logged (the memory copy remains).
  void put(const std::string& id, session::StoredResponse r);
  // The response `id` made with `scope`; nullopt when unknown or made with another scope.
  std::optional<session::StoredResponse> get(const std::string& id, const std::string& scope);
  // The conversation's chat messages after response `id` (root first): nullopt when `id` is
  // unknown to `scope`; an error when an earlier response of its chain is no longer stored,
  // the chain is longer than max_depth, or a stored text is unreadable.
  Result<std::optional<nlohmann::json>> history(const std::string& id, const std::string& scope);

 private:
  void remember(const std::string& id, session::StoredResponse r);  // REQUIRES: mu_ held

  const ResponseStoreLimits limits_;
  size_t bytes_ = 0;  // of entries_; guarded by mu_
  std::mutex mu_;
  session::SessionStore* store_ = nullptr;                            // guarded by mu_
  std::unordered_map<std::string, session::StoredResponse> entries_;  // guarded by mu_
  std::deque<std::string> order_;                                     // guarded by mu_; oldest first
};

}  // namespace kvgate::gateway
