#include "gateway/fatal_requests.h"

#include <fmt/format.h>
#include <xxhash.h>

namespace kvgate::gateway {

uint64_t FatalRequests::digest(std::string_view body_text) {
  return XXH3_64bits(body_text.data(), body_text.size());
}

FatalRequests::InFlight& FatalRequests::InFlight::operator=(InFlight&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = o.owner_;
    digest_ = o.digest_;
    o.owner_ = nullptr;
  }
  return *this;
}

void FatalRequests::InFlight::release() {
  if (owner_ != nullptr) owner_->leave(digest_);
  owner_ = nullptr;
}

FatalRequests::InFlight FatalRequests::enter(uint64_t digest) {
  std::lock_guard lock(mu_);
  ++in_flight_[digest];
  return InFlight(this, digest);
}

void FatalRequests::leave(uint64_t digest) {
  std::lock_guard lock(mu_);
  auto it = in_flight_.find(digest);
  if (it != in_flight_.end() && --it->second <= 0) in_flight_.erase(it);
}

size_t FatalRequests::engine_lost(bool hung) {
  std::lock_guard lock(mu_);
  const int strike = hung && in_flight_.size() == 1 ? 2 : 1;
  size_t became_fatal = 0;
  for (const auto& [digest, holders] : in_flight_) {
    auto [it, added] = strikes_.try_emplace(digest, 0);
    if (added) order_.push_back(digest);
    const bool was_fatal = it->second >= 2;
    it->second += strike;
    if (!was_fatal && it->second >= 2) ++became_fatal;
  }
  while (order_.size() > capacity_) {
    strikes_.erase(order_.front());
    order_.pop_front();
  }
  return became_fatal;
}

bool FatalRequests::fatal(uint64_t digest) const {
  std::lock_guard lock(mu_);
  auto it = strikes_.find(digest);
  return it != strikes_.end() && it->second >= 2;
}

ApiError fatal_request_error(bool resent) {
  constexpr const char* kCheaper =
      "Make it cheaper for the engine (a smaller schema or grammar, fewer tools, a shorter prompt)";
  if (resent) {
    return bad_request(fmt::format("an identical request was with the engine when it died or hung and was "
                                   "restarted; kvgate does not send it again. {}",
                                   kCheaper),
                       std::nullopt, "request_stopped_engine");
  }
  ApiError e =
      bad_gateway(fmt::format("the engine died or hung while working on this request and was restarted; "
                              "kvgate does not send this request again, nor identical ones. {}",
                              kCheaper));
  e.code = "request_stopped_engine";
  return e;
}

}  // namespace kvgate::gateway
