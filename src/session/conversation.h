// Conversation: what kvgate keeps of a session's conversation, and the upstream view built
// from it.
//
// The client sends its whole history every turn; kvgate keeps the part the engine still
// sees (the system message and the messages from the cut on, verbatim as the client sent
// them) plus what kvgate decided about it:
//   - `summary`: a note standing for the messages before the cut (L2 compaction), placed
//     right after the system message, or — on engines that can shift cached chunks
//     (mainline --cache-reuse) — after the retained messages it was made with, so the
//     retained messages keep their cached KV;
//   - `truncations` (L1): over-long messages rendered as head + marker + tail, decided once
//     per message (by content hash) and re-applied identically every turn;
//   - `pinned_system`: the system message with its volatile lines (clock, request ids) kept
//     at their first value; `notes`: the current values, appended to the user message they
//     arrived with, also re-applied identically.
// build_view() is a pure function of this state: the same state always gives the same
// messages, so between compactions the upstream prompt only grows at its end, and a
// restarted kvgate that loads the state produces the byte-identical view.
//
// Indices are absolute positions in the client's history (message 0 is the system message
// when there is one). Not thread-safe; guarded by the owning Session.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::session {

struct StoredMessage {
  uint64_t hash = 0;       // message_hash() of the message as the client sent it
  nlohmann::json message;  // as the client sent it (reasoning removed)
};

struct SummaryNote {
  std::string text;
  uint64_t covers_until = 0;  // history index (exclusive) the summary accounts for (== cut when made)
  uint64_t anchor = 0;        // history index the note is placed before (after-tail layout)
  bool after_system = true;   // layout: right after the system message, or before `anchor`
  std::string source;         // "model" or "extractive"
  uint64_t tokens = 0;
};

struct Truncation {
  size_t head_chars = 0;
  size_t tail_chars = 0;
  uint64_t elided_tokens = 0;
};

struct Conversation {
  std::optional<StoredMessage> system;   // as the client first sent it (hash of that version)
  std::string pinned_system;             // system text sent upstream (volatile lines pinned)
  uint64_t cut = 0;                      // first kept history index (after the system message)
  uint64_t length = 0;                   // history length known to kvgate
  std::vector<StoredMessage> kept;       // history[first_kept() .. length)
  std::optional<SummaryNote> summary;
  std::map<uint64_t, Truncation> truncations;  // by message hash
  // By history index (not content: a user may send the same text twice): text appended to
  // that message.
  std::map<uint64_t, std::string> notes;
  std::vector<uint64_t> chain;           // cumulative hashes of history[0 .. length)
  // exact_hash() of each history message as kvgate keeps it (0: not known, e.g. a state
  // saved before these were kept): tells a message the client still sends verbatim from one
  // whose volatile values changed.
  std::vector<uint64_t> exact;
  // History indices of the replies kvgate returned (the engine wrote them): a request that
  // carries one of them verbatim is a continuation of this conversation.
  std::set<uint64_t> replies;
  // History index of the first assistant message (kvgate's or the client's); length if none.
  uint64_t first_assistant = 0;
  bool has_assistant_before(uint64_t i) const { return first_assistant < std::min(i, length); }
  uint64_t generation = 0;               // bumped by every compaction (the prefix changed)
  // The client sends later windows of this conversation (it drops its oldest messages);
  // without a client id its compactions drop turns instead of summarising them.
  bool client_windows = false;
  // exact hash of the tool set (the request's `tools`) the conversation was last sent with, 0
  // without tools: with the system message, what a client's thread is (threads.h).
  uint64_t tools = 0;

  uint64_t first_kept() const { return std::max<uint64_t>(cut, system ? 1 : 0); }
  // The stored message at absolute index i (REQUIRES first_kept() <= i < length).
  const StoredMessage& at(uint64_t i) const { return kept[static_cast<size_t>(i - first_kept())]; }
  // Drops history from index i on (the client's history diverged there). If i falls before
  // the cut, the kept messages are cleared and the cut moves to i.
  void truncate(uint64_t i);
  // Drops the kept messages before history index i (the client no longer sends them; no
  // later request can carry them): the cut moves to i, the summary and notes before it go.
  void drop_front(uint64_t i);
  // Appends messages the client added (and extends the chain).
  void append(const nlohmann::json& message);
  // Appends the reply kvgate returned for the last request.
  void append_reply(const nlohmann::json& message);

  nlohmann::json to_json() const;
  static std::optional<Conversation> from_json(const nlohmann::json& j);
};

// The marker L1 leaves inside a truncated message.
std::string truncation_marker(uint64_t elided_tokens);
// Applies a truncation decision to a text.
std::string apply_truncation(const std::string& text, const Truncation& t);
// The summary note's text as the model sees it.
std::string summary_note_text(const SummaryNote& s);

// The messages sent upstream.
nlohmann::json build_view(const Conversation& c);

}  // namespace kvgate::session
