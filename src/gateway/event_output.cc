#include "gateway/event_output.h"

namespace kvgate::gateway {

using nlohmann::json;

EventOutput::~EventOutput() = default;

void EventOutput::open_stream(CancelScope& cancel) {
  relay_ = std::make_unique<StreamRelay>(writer_, cancel, relay_options_);
}

bool EventOutput::write(const std::vector<std::string>& events) {
  if (!started_) {
    started_ = true;
    // Asked for even when another member wrote them: they set up the API's encoder.
    const std::vector<std::string> opening = start_events();
    if (!writer_.continues_stream() && !write(opening)) return false;
  }
  for (const std::string& e : events) {
    if (!relay_->write(e)) return false;
  }
  return true;
}

bool EventOutput::begin_stream() { return relay_->begin() && write({}); }

bool EventOutput::engine_chunk(const json& chunk, const std::string&) {
  answered_ = true;
  return write(chunk_events(chunk));
}

bool EventOutput::engine_error(const ApiError& error, const std::string&) {
  answered_ = true;
  if (!engine_error_) engine_error_ = error;
  return !relay_->client_gone();
}

bool EventOutput::kvgate_chunk(const json& chunk) {
  answered_ = true;
  return write(chunk_events(chunk));
}

void EventOutput::progress(std::string text) { relay_->set_progress(std::move(text)); }

void EventOutput::end_stream(bool complete) {
  if (complete) {
    write(finish_events());
  } else if (engine_error_ && !failed_) {
    failed_ = true;
    write(error_events(*engine_error_));
  }
  relay_->finish();
}

bool EventOutput::hand_on(int status, const std::vector<std::string>& error_events) {
  // The opening events go out first: a keep-alive may have begun the stream before them, and
  // the member that continues it writes none.
  if (!write({})) return false;
  std::string text;
  for (const std::string& e : error_events) text += e;
  return writer_.hand_on(status, text);
}

void EventOutput::fail(const ApiError& error) {
  if (relay_ && (relay_->started() || writer_.continues_stream())) {
    if (!failed_) {
      const std::vector<std::string> events = error_events(error);
      if (answered_ || !engine_went_away(error) || !hand_on(error.status, events)) write(events);
    }
    failed_ = true;
    return;
  }
  if (relay_) relay_->finish();
  send_error(error);
}

}  // namespace kvgate::gateway
