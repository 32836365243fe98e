#include "upstream/silence_watch.h"

#include <fmt/format.h>

namespace kvgate::gateway {

using nlohmann::json;

namespace {

uint64_t count(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() && it->get<int64_t>() > 0 ? it->get<uint64_t>() : 0;
}

int64_t ns_of(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

std::optional<uint64_t> slot_work(const json& slots, int slot) {
  if (!slots.is_array()) return std::nullopt;
  for (const auto& s : slots) {
    if (!s.is_object() || !s.contains("id") || s["id"] != slot) continue;
    uint64_t work = count(s, "n_prompt_tokens_processed");
    bool known = s.contains("n_prompt_tokens_processed");
    if (auto next = s.find("next_token"); next != s.end()) {
      // mainline: an array of one object per sequence; ik: one object.
      for (const auto& n : next->is_array() ? *next : json::array({*next})) {
        if (!n.is_object() || !n.contains("n_decoded")) continue;
        work += count(n, "n_decoded");
        known = true;
      }
    }
    if (known) return work;
  }
  return std::nullopt;
}

SilenceWatch::SilenceWatch(Upstream& upstream, int slot, CancelScope& turn, CancelScope& attempt,
                           SilenceWatchOptions options, std::function<void(std::string)> on_progress)
    : upstream_(upstream),
      slot_(slot),
      turn_(turn),
      attempt_(attempt),
      options_(options),
      on_progress_(std::move(on_progress)),
      last_heard_ns_(ns_of(Clock::now())),
      thread_([this] { run(); }) {}

SilenceWatch::~SilenceWatch() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SilenceWatch::heard() { last_heard_ns_.store(ns_of(Clock::now())); }

void SilenceWatch::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, options_.tick, [this] { return stop_; });
    if (stop_) return;
    if (turn_.cancelled()) {
      attempt_.cancel();
      return;
    }
    lock.unlock();
    const bool stuck = check(Clock::now());
    lock.lock();
    if (stuck) {
      stuck_ = true;
      attempt_.cancel();
      return;
    }
  }
}

bool SilenceWatch::check(Clock::time_point now) {
  const Clock::time_point heard{std::chrono::nanoseconds(last_heard_ns_.load())};
  if (now - heard >= options_.poll && now - last_poll_ >= options_.poll) {
    last_poll_ = now;
    ++polls_;
    auto res = upstream_.call("GET", "/slots", "", std::chrono::milliseconds(5000), nullptr);
    std::optional<uint64_t> work;
    if (res.ok() && res->status == 200) work = slot_work(json::parse(res->body, nullptr, false), slot_);
    if (work && last_work_ && *work > *last_work_) {
      last_progress_ = now;
      if (on_progress_) {
        on_progress_(
            fmt::format("the engine is working: slot {} did {} tokens of work since the last look (its "
                        "output is held back meanwhile)",
                        slot_, *work - *last_work_));
      }
    }
    last_work_ = work;
  }
  return now - std::max(heard, last_progress_) >= options_.timeout;
}

}  // namespace kvgate::gateway
