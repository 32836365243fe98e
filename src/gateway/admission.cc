#include "gateway/admission.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>

#include "util/time.h"

namespace kvgate::gateway {

using Clock = std::chrono::steady_clock;

namespace {
AdmissionOptions normalised(AdmissionOptions o) {
  o.max_active = std::max<size_t>(o.max_active, 1);
  o.max_waiting_per_key = std::max<size_t>(o.max_waiting_per_key, 1);
  return o;
}
}  // namespace

Admission::Admission(AdmissionOptions options) : options_(normalised(options)) {}

Admission::Ticket::Ticket(Ticket&& other) noexcept
    : owner_(other.owner_), key_(std::move(other.key_)), since_(other.since_), waited_(other.waited_) {
  other.owner_ = nullptr;
}

Admission::Ticket& Admission::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_;
    key_ = std::move(other.key_);
    since_ = other.since_;
    waited_ = other.waited_;
    other.owner_ = nullptr;
  }
  return *this;
}

void Admission::Ticket::release() {
  if (owner_ == nullptr) return;
  Admission* a = owner_;
  owner_ = nullptr;
  a->leave(key_, since_);
}

const char* Admission::Refusal::code() const {
  switch (reason) {
    case Reason::kQueueFull:
      return "queue_full";
    case Reason::kKeyQueueFull:
      return "session_queue_full";
    case Reason::kTimeout:
      return "queue_timeout";
    case Reason::kClientGone:
      return "client_gone";
  }
  return "queue_full";
}

bool Admission::eligible(const Waiter* w) const {
  if (active_ >= options_.max_active) return false;
  // Among the sessions that are not busy, the one served least recently (never served
  // first), with its earliest waiter; ties go to the earliest arrival.
  const Waiter* best = nullptr;
  uint64_t best_served = 0;
  std::unordered_set<std::string_view> seen;
  for (const Waiter* q : queue_) {
    if (!seen.insert(q->key).second) continue;  // not the first of its session
    if (busy_.count(q->key) != 0) continue;
    const auto it = last_served_.find(q->key);
    const uint64_t served = it == last_served_.end() ? 0 : it->second;
    if (best == nullptr || served < best_served) {
      best = q;
      best_served = served;
    }
  }
  return best == w;
}

void Admission::forget_if_idle(const std::string& key) {
  if (busy_.count(key) == 0 && queued_.count(key) == 0) last_served_.erase(key);
}

int Admission::retry_after_locked(size_t ahead) const {
  const double hold_s = std::max(stats_.mean_hold_ms, 1000.0) / 1000.0;
  const double s = hold_s * static_cast<double>(ahead + 1) / static_cast<double>(options_.max_active);
  return static_cast<int>(std::clamp(std::ceil(s), 1.0, 60.0));
}

Result<Admission::Ticket, Admission::Refusal> Admission::enter(const std::string& key,
                                                              const std::function<bool()>& client_gone) {
  const auto arrived = Clock::now();
  const auto deadline = arrived + options_.max_wait;
  std::unique_lock lock(mu_);
  auto refuse = [&](Refusal::Reason reason, std::string message) {
    Refusal r{reason, retry_after_locked(queue_.size()), std::move(message)};
    if (reason == Refusal::Reason::kTimeout) {
      ++stats_.refused_timeout;
    } else if (reason == Refusal::Reason::kClientGone) {
      ++stats_.client_gone;
    } else {
      ++stats_.refused_queue_full;
    }
    return r;
  };
  Waiter self{key};
  queue_.push_back(&self);
  ++queued_[key];
  auto dequeue = [&] {
    queue_.remove(&self);
    if (--queued_[key] == 0) queued_.erase(key);
    cv_.notify_all();  // the order changed: another waiter may now be first
  };
  auto give_up = [&] {
    dequeue();
    forget_if_idle(key);
  };
  if (!eligible(&self)) {
    // It has to wait: within the bounds, or refused at once.
    const size_t others = queue_.size() - 1;
    const size_t same_key = queued_[key] - 1;
    if (others >= options_.max_waiting) {
      give_up();
      return refuse(
          Refusal::Reason::kQueueFull,
          fmt::format("kvgate is at capacity: {} requests are working with the engine and {} are waiting "
                      "(kvgate up --max-queue); retry later",
                      active_, others));
    }
    if (same_key >= options_.max_waiting_per_key) {
      give_up();
      return refuse(
          Refusal::Reason::kKeyQueueFull,
          fmt::format("this conversation already has {} requests waiting; send the next one after the "
                      "previous answers arrive",
                      same_key));
    }
  }
  while (!eligible(&self)) {
    const auto now = Clock::now();
    if (now >= deadline) {
      give_up();
      return refuse(
          Refusal::Reason::kTimeout,
          fmt::format("waited {} ms for the engine without getting a place (kvgate up --queue-timeout); "
                      "retry later",
                      options_.max_wait.count()));
    }
    if (client_gone) {
      // Poll the client without holding the lock.
      lock.unlock();
      const bool gone = client_gone();
      lock.lock();
      if (gone) {
        give_up();
        return refuse(Refusal::Reason::kClientGone, "the client closed the connection while waiting");
      }
      if (eligible(&self)) break;
      cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
    } else {
      cv_.wait_until(lock, deadline);
    }
  }
  dequeue();
  ++active_;
  ++busy_[key];
  last_served_[key] = ++serial_;
  ++stats_.admitted;
  Ticket t;
  t.owner_ = this;
  t.key_ = key;
  t.since_ = Clock::now();
  t.waited_ = std::chrono::duration_cast<std::chrono::milliseconds>(t.since_ - arrived);
  stats_.max_wait_ms = std::max(stats_.max_wait_ms, static_cast<double>(t.waited_.count()));
  return t;
}

void Admission::leave(const std::string& key, Clock::time_point since) {
  const double held_ms = util::ms_since(since);
  {
    std::lock_guard lock(mu_);
    --active_;
    if (auto it = busy_.find(key); it != busy_.end() && --it->second == 0) busy_.erase(it);
    forget_if_idle(key);
    stats_.mean_hold_ms = stats_.mean_hold_ms == 0 ? held_ms : stats_.mean_hold_ms * 0.8 + held_ms * 0.2;
  }
  cv_.notify_all();
}

Admission::Stats Admission::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.active = active_;
  s.waiting = queue_.size();
  return s;
}

nlohmann::json Admission::to_json() const {
  const Stats s = stats();
  return {{"active", s.active},
          {"waiting", s.waiting},
          {"max_active", options_.max_active},
          {"max_waiting", options_.max_waiting},
          {"max_waiting_per_session", options_.max_waiting_per_key},
          {"max_wait_ms", options_.max_wait.count()},
          {"admitted", s.admitted},
          {"refused_queue_full", s.refused_queue_full},
          {"refused_timeout", s.refused_timeout},
          {"client_gone", s.client_gone},
          {"longest_wait_ms", s.max_wait_ms},
          {"mean_hold_ms", s.mean_hold_ms}};
}

}  // namespace kvgate::gateway
