// Incremental Server-Sent Events parser, for relaying an engine's stream event by event and
// looking inside each event (usage, timings, errors) without buffering the stream.
//
// feed() takes bytes as they arrive and returns the events they complete. An event ends at
// a blank line; lines may end in LF, CRLF or CR; `data:` lines are joined with LF; lines
// starting with ':' are comments (keep-alives). A line ending in a lone CR completes when the
// next byte arrives (to tell CR from CRLF). `raw` is the event's exact text including
// its terminating blank line, so relaying raw reproduces the upstream byte for byte. A
// line longer than `max_line` (default 64 MiB) is an error (the stream is not SSE).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvgate::http {

struct SseEvent {
  std::string raw;
  std::string event;  // the `event:` field, if any
  std::string data;   // `data:` lines joined with '\n'
  bool has_data = false;
  bool comment_only = false;  // only comment lines (e.g. ": ping")
  bool is_done() const { return has_data && data == "[DONE]"; }
};

class SseParser {
 public:
  explicit SseParser(size_t max_line = 64 * 1024 * 1024) : max_line_(max_line) {}
  std::vector<SseEvent> feed(std::string_view bytes);
  // Whatever remains unterminated (for diagnostics at end of stream).
  const std::string& pending() const { return buffer_; }
  bool failed() const { return failed_; }

 private:
  void process_line(std::string_view line);
  void finish_event(std::vector<SseEvent>& out);

  size_t max_line_;
  std::string buffer_;      // bytes not yet consumed (an incomplete line)
  std::string event_raw_;   // raw text of the current event so far
  SseEvent current_;
  bool any_field_ = false;
  bool any_comment_ = false;
  bool last_was_cr_ = false;  // a CR was seen; its line ends with the next byte
  bool failed_ = false;
};

}  // namespace kvgate::http
