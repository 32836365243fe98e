// Threads: what a client's id means when its requests are not one thread.
//
// A client's id — the X-Session-Id header, `prompt_cache_key`, `user` — names a *family* of
// requests, not one conversation: opencode sends its title request (its own system prompt,
// "Generate a title for this conversation:", the user's message) and then its agent request
// under one X-Session-Id; Claude Code, Codex and Kilo send summaries, quota checks and
// sub-agents beside their main thread. Within its family a request belongs to the thread whose
// history it extends:
//   - the thread has the request's system message (up to volatile values: message_hash()) and
//     its tool set (ThreadIdentity), and
//   - the request repeats the thread's whole last request (it goes on from it, or retries it),
//     or carries the thread's last reply
//     verbatim (a later window: the client dropped its oldest turns), or carries a third of the
//     lines of the thread's last reply among its first user messages (a self-summarised
//     continuation).
// Among several such threads, the one sharing the longest message prefix with the request,
// then the most recently used. Otherwise the request starts a sibling thread under the same id.
// Each thread is a Session of its own — its conversation, compaction state and slot — so what
// intake.h keeps for a named conversation is kept per thread, and a request is never given
// content of another thread.
//
// Pure functions; the session table (session.h) applies them under its lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "session/conversation.h"

namespace kvgate::session {

struct RequestKeys;

// How many threads one family holds; a new thread beyond them replaces the least recently
// used idle one.
inline constexpr int kMaxThreads = 8;

// The exact hash of a request's tool set (its `tools` value), 0 when it has none.
uint64_t tools_hash(const nlohmann::json& body);

// A thread's identity: its system message (message_hash(), 0 without one) and tool set.
uint64_t thread_identity(uint64_t system_hash, uint64_t tools);
uint64_t thread_identity(const Conversation& c);
uint64_t thread_identity(const RequestKeys& r);

// What the table keeps of a thread to place a family's requests (session.h: guarded by the
// session's mu, set from its conversation when a turn commits).
struct ThreadKeys {
  uint64_t identity = 0;
  std::vector<uint64_t> chain;        // the conversation's chain (history as the client last saw it)
  uint64_t request_messages = 0;      // messages of its last request (the chain may add the reply)
  uint64_t last_reply_exact = 0;      // exact hash of the last reply kvgate returned (0: none)
  uint64_t last_request_exact = 0;    // exact hash of the last request's last message (0: none)
  std::vector<uint64_t> reply_lines;  // line_hashes() of the last reply
};

// Whether a request belongs to a thread, and how many messages of it the request shares
// (the common prefix of the two chains; 0 when it does not belong).
struct ThreadFit {
  bool belongs = false;
  uint64_t shared = 0;
};
ThreadFit thread_fit(const ThreadKeys& thread, const RequestKeys& request);

// The table's id of thread `n` (1-based) of the family a client named `client_id` in `scope`:
// thread 1 is scoped_session_id(scope, client_id) (a conversation named before threads keeps
// its id), thread n > 1 is "SCOPE.n~ID" (a scope holds no '~' or '.', so no client id can
// name another family's thread).
std::string thread_session_id(const std::string& scope, const std::string& client_id, int n);

}  // namespace kvgate::session
