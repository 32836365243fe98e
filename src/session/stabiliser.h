// Prefix stabiliser: keeps the upstream prompt's prefix byte-identical across turns where
// clients make it drift, and explains every place it still breaks.
//
// Rules (each can be switched off):
//   - volatile system lines: a system prompt whose lines differ from the first-seen version
//     only in volatile substrings (clock, date, request ids; see normalize.h) keeps its
//     first version upstream; the current values travel as a note appended to the newest
//     user message (re-applied identically on later turns);
//   - volatile lines of an earlier message (a user, system or developer message after the
//     first: an environment block with today's date) are pinned the same way, and a short
//     volatile reminder the client moved from an earlier message to its newest one stays
//     where it was (pin_volatile_message());
//   - tool results of one tool-call turn that arrive out of order are put back in call order;
//   - a client that dropped its oldest turns (sends a later window of the conversation) is
//     continued on the session's existing view (recognition in SessionTable/chat flow).
// diagnose() names where a new prompt diverges from the previous one and why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::session {

struct StabiliserOptions {
  bool pin_volatile_lines = true;
  bool reorder_tool_results = true;
  bool continue_truncated_history = true;
};

struct PinResult {
  std::string upstream;             // the system text to send
  std::vector<std::string> current; // current versions of the pinned lines (for the note)
  bool edited = false;              // the client changed more than volatile substrings
};

// `pinned` is what was sent so far (first-seen version); `current` is what the client sent now.
PinResult pin_volatile_lines(const std::string& pinned, const std::string& current);

// Whether `current` (the client's version of an earlier message) is `pinned` (the version
// kept) up to volatile values: the same role and fields, no tool calls, the same text parts
// (content as a string is one part) whose lines differ only in volatile substrings, less
// parts that are volatile reminders (is_volatile_reminder()) found again, up to volatile
// values, among the text parts of `newest_user` (the request's newest user message: the
// client moved the reminder there). The current versions of the differing lines, or nullopt
// when the two are not the same message.
std::optional<std::vector<std::string>> pin_volatile_message(const nlohmann::json& pinned, const nlohmann::json& current,
                                                             const nlohmann::json& newest_user);

// The note carrying current volatile values, appended to the newest user message: this head,
// then the lines, then "]".
inline constexpr std::string_view kVolatileNoteHead = "\n\n[kvgate: current values of lines earlier in the conversation:";
std::string volatile_note(const std::vector<std::string>& lines);

// Reorders tool messages that follow an assistant message with tool_calls into call order,
// for messages[from ..]. Returns how many groups were reordered.
size_t reorder_tool_results(nlohmann::json& messages, size_t from = 0);

// Why a prompt diverged from the previous one.
enum class BreakCause {
  kNone,
  kClientEdit,        // the client changed an earlier message
  kVolatileLine,      // a volatile line changed (pinning off)
  kToolReorder,       // tool results came in another order (reordering off)
  kClientTruncation,  // the client dropped its oldest turns
  kCompaction,        // kvgate compacted the view
  kSlotEviction,      // the prompt was identical, the engine's cache was not
  kEngineRestart,     // the engine restarted (its cache is empty)
};
const char* cause_name(BreakCause cause);

struct Divergence {
  BreakCause cause = BreakCause::kNone;
  size_t message = 0;       // first view message that differs
  size_t byte = 0;          // first differing byte of the rendered prompt (if both known)
  std::string detail;
};

// First differing message between two views (size of the shorter if one is a prefix).
size_t first_different_message(const nlohmann::json& before, const nlohmann::json& after);
// First differing byte of two rendered prompts.
size_t first_different_byte(const std::string& before, const std::string& after);

}  // namespace kvgate::session
