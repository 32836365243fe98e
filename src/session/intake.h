// Intake: brings a request's messages into the conversation kvgate keeps for its session,
// under the gateway's isolation invariant (docs/GATEWAY.md, "What reaches the engine"):
//
//   The prompt kvgate sends upstream contains only (a) content of this request, (b) kvgate's
//   own derivatives of content of this request (truncation markers, summaries of messages
//   this request still carries, the note with this request's volatile values), and (c)
//   content kept from earlier requests of the same conversation *named by its client*
//   (an explicit id, scoped to the API key; the id names a family, and the conversation is
//   the request's thread in it: threads.h).
//
// Recognition without an id (session.h) may choose the session — its slot, its cached
// prefix, its compaction state — but never adds what the request does not carry:
//   - A stored message is used in place of the request's only when the two are the same
//     exactly (exact_hash(): formatting such as whitespace inside tool-call arguments may
//     differ, content may not). A message whose volatile values changed (a date, an id) is
//     taken as the request has it, and the conversation continues from there — unless the
//     evidence below allows pinning it.
//   - State beyond the messages themselves — the system message, and the system, developer
//     and user messages before the newest user message, pinned at their first values with a
//     note of the current ones (or kept with a volatile reminder the client moved to its
//     newest message: stabiliser.h, pin_volatile_message()), notes on earlier messages,
//     summaries — carries values from earlier requests, so it is kept only with evidence that
//     this is the same conversation: a client id, or the request carrying the session's whole
//     last request verbatim (up to those pinnable volatile values) with an assistant turn in
//     it (or followed by the reply kvgate gave it) — "history echo". Without it (a retry of a first turn, a
//     one-shot agent run again the next day, another client with the same opening, one that shares only some
//     messages), the conversation is rebuilt from the request alone.
//   - A later window of a conversation (the client dropped its oldest turns) continues the
//     kept history, summary included, for a named conversation (not when a user, system or
//     developer message of the request comes before the part it shares: the kept history
//     would replace the request's own content). Recognised by content, it
//     keeps what the request still carries verbatim — the kept messages from the cut on, the
//     truncation decisions — and sets aside the summary and any kept message the request
//     no longer carries (the conversation is then marked `client_windows`: its compactions
//     drop turns rather than summarise them); a window that does not carry the stored
//     history's end verbatim restarts from the request's own messages.
// Volatile values: when a message is pinned, the note with this request's current
// values is on the newest user message — retries and re-runs included; tool turns after a
// question keep the question's note (the values of when it was asked).
//
// Pure: no I/O, no locks; the caller holds the session's turn.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "session/conversation.h"
#include "session/session.h"
#include "session/stabiliser.h"

namespace kvgate::session {

struct IntakeRequest {
  const nlohmann::json& messages;  // the request's stabilised messages
  const RequestKeys& keys;         // RequestKeys::of(messages)
  bool named = false;              // the session is named by its client (explicit id)
  bool window = false;             // recognised as a later window of the session
  uint64_t stored_request_messages = 0;  // messages of the session's last request (Session)
};

// Why stored state beyond verbatim messages may be used for this request.
enum class Evidence {
  kNone,       // none: the conversation is rebuilt from the request
  kClientId,   // the client named the conversation
  kHistoryEcho,  // the request carries the session's last request and an assistant turn of it
};
const char* evidence_name(Evidence e);

struct Intake {
  Conversation conversation;
  uint64_t first_new = 0;          // history index of the first message this request added
  Evidence evidence = Evidence::kNone;
  bool restarted = false;          // stored state was set aside: the conversation is the request's
  bool window_continued = false;   // a named conversation continued past the client's dropped turns
  // A later window recognised by content that still carries the kept messages: the cut, the
  // truncations and what follows are kept (a summary is not: it stands for messages the
  // request no longer carries). `window_front_moved`: the request no longer carries the
  // oldest kept messages, which were dropped (the prefix changed at its start).
  bool window_kept = false;
  bool window_front_moved = false;
  std::vector<std::string> volatile_now;  // current versions of the pinned system lines
  std::optional<BreakCause> cause;        // why the upstream prompt will not extend the last one
  std::string cause_detail;
};

Intake take_in(const Conversation& stored, const IntakeRequest& request, const StabiliserOptions& options);

}  // namespace kvgate::session
