// Test support for the wire library (linked into wire_test only): JSON pointers for
// mutation tests, the SSE events the encoders write, read back, and checks of both event
// grammars that rebuild what a client would accumulate.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "wire/wire_error.h"

namespace kvgate::wire::testing {

// Every JSON pointer into `value`, containers included (not the root).
std::vector<std::string> all_pointers(const ClientJson& value, const std::string& prefix = "");

struct Event {
  std::string name;
  ClientJson data;
};
// Splits "event: NAME\ndata: JSON\n\n" strings; a string that is not exactly one such event
// is a test failure (reported through gtest) and skipped.
std::vector<Event> parse_events(const std::vector<std::string>& sse);

// Checks the Anthropic event grammar (message_start first; blocks started in index order,
// deltas of the block's own type only while it is open, each stopped once; one
// message_delta after the last stop; message_stop last; pings anywhere) and rebuilds the
// final message as a client accumulates it (tool_use input parsed from the concatenated
// partial_json). Violations are gtest failures.
ClientJson accumulate_anthropic(const std::vector<Event>& events);

// Checks the Responses event grammar (sequence numbers 0, 1, 2, …; created and in_progress
// first; items added in output order, deltas only for the open item, the done events'
// text equal to the concatenated deltas; completed/incomplete/failed last, its output equal
// to the done items) and returns the terminal event's response. Violations are gtest
// failures.
ClientJson accumulate_responses(const std::vector<Event>& events);

}  // namespace kvgate::wire::testing
