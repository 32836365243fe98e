#include "http/sse.h"

namespace kvgate::http {

std::vector<SseEvent> SseParser::feed(std::string_view bytes) {
  std::vector<SseEvent> out;
  auto end_line = [&](std::string_view terminator) {
    event_raw_ += buffer_;
    event_raw_ += terminator;
    if (buffer_.empty()) {
      finish_event(out);
    } else {
      process_line(buffer_);
    }
    buffer_.clear();
  };
  for (char c : bytes) {
    if (failed_) break;
    if (last_was_cr_) {
      // A CR ends a line; a following LF belongs to the same terminator.
      last_was_cr_ = false;
      if (c == '\n') {
        end_line("\r\n");
        continue;
      }
      end_line("\r");
    }
    if (c == '\r') {
      last_was_cr_ = true;
    } else if (c == '\n') {
      end_line("\n");
    } else {
      buffer_ += c;
      if (buffer_.size() > max_line_) failed_ = true;
    }
  }
  return out;
}

void SseParser::process_line(std::string_view line) {
  if (line.front() == ':') {
    any_comment_ = true;
    return;
  }
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  any_field_ = true;
  if (field == "data") {
    if (current_.has_data) current_.data += '\n';
    current_.data += value;
    current_.has_data = true;
  } else if (field == "event") {
    current_.event = std::string(value);
  }
}

void SseParser::finish_event(std::vector<SseEvent>& out) {
  // A blank line with no event before it completes nothing: its bytes stay in event_raw_ and
  // are relayed with the next event, so the relayed stream is still the upstream's bytes.
  if (!any_field_ && !any_comment_) return;
  current_.raw = std::move(event_raw_);
  current_.comment_only = !any_field_;
  out.push_back(std::move(current_));
  current_ = SseEvent();
  event_raw_.clear();
  any_field_ = false;
  any_comment_ = false;
}

}  // namespace kvgate::http
