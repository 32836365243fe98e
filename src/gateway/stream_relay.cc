#include "gateway/stream_relay.h"

#include <algorithm>

namespace kvgate::gateway {

using http::HeaderList;

namespace {
const HeaderList kSseHeaders = {{"Content-Type", "text/event-stream"},
                                {"Cache-Control", "no-cache"},
                                {"X-Accel-Buffering", "no"}};
}  // namespace

std::string sse_comment(std::string_view about) {
  std::string out = ": ";
  out += about;
  out += "\n\n";
  return out;
}

StreamRelay::StreamRelay(ResponseWriter& writer, CancelScope& cancel, RelayOptions options)
    : writer_(writer), cancel_(cancel), options_(std::move(options)) {
  ticker_ = std::thread([this] { tick(); });
}

StreamRelay::~StreamRelay() { finish(); }

bool StreamRelay::begin_locked() {
  if (started_) return !gone_;
  started_ = true;
  last_write_ = std::chrono::steady_clock::now();
  if (!writer_.begin_stream(200, kSseHeaders)) gone_ = true;
  return !gone_;
}

bool StreamRelay::begin() {
  std::lock_guard lock(mu_);
  return begin_locked();
}

bool StreamRelay::started() {
  std::lock_guard lock(mu_);
  return started_;
}

bool StreamRelay::write(std::string_view event) {
  std::lock_guard lock(mu_);
  if (finished_ || !begin_locked()) return false;
  if (!writer_.write(event)) {
    gone_ = true;
    cancel_.cancel();
    return false;
  }
  last_write_ = std::chrono::steady_clock::now();
  return true;
}

void StreamRelay::set_progress(std::string text) {
  std::lock_guard lock(mu_);
  progress_ = std::move(text);
}

void StreamRelay::finish() {
  {
    std::lock_guard lock(mu_);
    if (!finished_) {
      finished_ = true;
      if (started_ && !gone_) writer_.end();
    }
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void StreamRelay::tick() {
  std::unique_lock lock(mu_);
  while (!finished_) {
    // Often enough for the interval asked (a short one in tests), at most every 200 ms.
    cv_.wait_for(lock, std::clamp(options_.keepalive / 2, std::chrono::milliseconds(10), std::chrono::milliseconds(200)));
    if (finished_) break;
    const auto now = std::chrono::steady_clock::now();
    // The client left: stop the engine's work on this request.
    if (writer_.client_gone()) {
      gone_ = true;
      cancel_.cancel();
      break;
    }
    if (!started_ && now - created_ >= options_.head_grace) {
      if (!begin_locked()) {
        cancel_.cancel();
        break;
      }
      writer_.write(options_.keepalive_text("kvgate: waiting for the engine"));
      last_write_ = now;
    }
    if (started_ && now - last_write_ >= options_.keepalive) {
      const std::string text = options_.keepalive_text(progress_.empty() ? std::string_view("keep-alive") : progress_);
      if (!writer_.write(text)) {
        gone_ = true;
        cancel_.cancel();
        break;
      }
      last_write_ = now;
    }
  }
}

}  // namespace kvgate::gateway
