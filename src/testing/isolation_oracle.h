// The isolation oracle: checks an upstream view against the gateway's invariant
// (intake.h, docs/GATEWAY.md) from the outside, knowing only what clients sent and what
// kvgate answered — not how recognition or intake work. Used by the property test, the
// recognition fuzz target and the end-to-end tests.
//
// For a request R (scope, optional client id), the view V passes when:
//   - every message of V other than the system message and kvgate's summary note is, once
//     kvgate's volatile-values note and truncation marker are taken out, exactly a message of
//     R — or, for a named conversation, of an earlier request or reply with the same scope,
//     id and thread. A client's id names a family of threads (session/threads.h): the caller
//     that knows which thread a request is (a generated client: its main thread, a title
//     request, a sub-agent) passes it, and content of the id's other threads is refused;
//   - the system message is R's, or differs from R's only in volatile substrings (normalize.h)
//     with every differing line taken from the system message of an *ancestor*, and every
//     line of R's system message that V's lacks is in a volatile-values note of V (the
//     current values reach the model) — or, when R goes on after its newest user message
//     (tool results, more turns of one question), a note holds that line up to volatile
//     values (the question's note keeps the values of when it was asked). Ancestors are the
//     earlier requests of the same scope that R carries whole and verbatim (system, user and
//     developer messages before R's newest user message up to volatile values) when they
//     hold an assistant turn or R also carries, right after, the reply kvgate gave them; and
//     the earlier requests of the same named conversation;
//   - a message of V before R's newest user message may also be an ancestor's message at the
//     same place that differs from R's only in volatile values (a pinned earlier message);
//   - every line of a volatile-values note is a line of R's messages or of an ancestor's
//     system, user or developer messages (a note kept on an earlier turn);
//   - every line of a summary written by `traceable_summary` is the text of a message R
//     carries (or of the named conversation's history).
// MiniGateway below drives recognition, intake and compaction as a chat turn does, for
// tests and fuzzing without an engine. Not thread-safe (one of each per test).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "session/conversation.h"
#include "session/intake.h"
#include "session/session.h"

namespace kvgate::testing {

using session::Conversation;
using session::Intake;
using session::Session;
using session::SessionTable;

class IsolationOracle {
 public:
  // Records a request kvgate answered and its reply (call after check()); `thread` is the
  // client's own thread of the request ("": the id is taken as one thread).
  void answered(const std::string& scope, const std::optional<std::string>& id, const nlohmann::json& messages,
                const nlohmann::json& reply, const std::string& thread = "");
  // Empty when `view` satisfies the invariant for the request; otherwise what broke it.
  std::string check(const std::string& scope, const std::optional<std::string>& id, const nlohmann::json& messages,
                    const nlohmann::json& view, const std::string& thread = "") const;
  // Empty when every message of the request after its system message reaches `view` (up to
  // kvgate's note), in the request's order: nothing of the request was lost or replaced. For
  // views no compaction touched.
  static std::string check_complete(const nlohmann::json& messages, const nlohmann::json& view);

 private:
  struct Answered {
    std::string scope;
    std::optional<std::string> id;
    std::string thread;
    nlohmann::json messages;
    nlohmann::json reply;
    std::vector<uint64_t> exact;  // exact_hash() of each message (the system's: message_hash())
    std::vector<uint64_t> masked;  // message_hash() of each message
    uint64_t reply_exact = 0;
  };
  std::vector<const Answered*> ancestors(const std::string& scope, const std::optional<std::string>& id,
                                         const std::string& thread, const nlohmann::json& messages) const;
  std::vector<Answered> log_;
};

// A chat turn's steps 2, 3, 5 and 7 (gateway/turn.h) without the engine: recognise, take in,
// compact past a watermark `high` (tokens = bytes / 4, traceable summaries; 0: never), answer with the
// given reply, save to a store in memory (so evicted sessions come back by their keys).
class MiniGateway {
 public:
  explicit MiniGateway(size_t max_sessions = 1024, uint64_t high = 0);

  struct Turn {
    nlohmann::json view;  // what would be sent upstream
    std::shared_ptr<Session> session;
    Intake intake;
    std::string how;      // how the table recognised the request
  };
  // `tools`: tools_hash() of the request's tool set (threads.h), 0 without tools.
  Turn send(const std::string& scope, const std::optional<std::string>& id, const nlohmann::json& messages,
            const nlohmann::json& reply, uint64_t tools = 0);
  SessionTable& table() { return table_; }

 private:
  struct Saved {
    std::string scope;
    bool named = false;
    Conversation conversation;
    size_t request_messages = 0;
  };
  SessionTable table_;
  uint64_t high_;
  std::map<uint64_t, std::string> keys_;
  std::map<std::string, Saved> saved_;
};

// A summariser whose summary the oracle can trace: one JSON-quoted line per summarised
// message text (the previous summary's lines first).
std::string traceable_summary(const Conversation& c, uint64_t until);

}  // namespace kvgate::testing
