#include "session/intake.h"

#include <algorithm>

#include <fmt/format.h>

#include "session/normalize.h"

namespace kvgate::session {

using nlohmann::json;

namespace {

bool is_role(const json& m, const char* role) { return m.is_object() && m.value("role", "") == role; }

bool has_string_system(const json& messages) {
  return !messages.empty() && is_role(messages[0], "system") && messages[0].contains("content") &&
         messages[0]["content"].is_string();
}

// A conversation with none of the stored state but the truncation decisions (L1): those are
// a function of a message's own text, re-applied to the request's own messages.
Conversation fresh_from(const Conversation& stored) {
  Conversation c;
  c.truncations = stored.truncations;
  c.generation = stored.generation;
  return c;
}

struct Window {
  uint64_t history = 0;  // where the request's window starts in the stored history
  size_t request = 0;    // the request's first message of the window
  uint64_t overlap = 0;  // messages both have, verbatim
};

// Where a request that dropped its oldest turns starts in the stored history: the first
// request message (after `from`) found among the kept messages, with every message of the
// overlap the same (masked, then exactly).
std::optional<Window> align_window(const Conversation& conv, const RequestKeys& keys, size_t from) {
  const size_t n = keys.hashes.size();
  for (size_t j = from; j < n; ++j) {
    for (uint64_t h = conv.first_kept(); h < conv.length; ++h) {
      if (conv.at(h).hash != keys.hashes[j]) continue;
      const uint64_t overlap = std::min<uint64_t>(conv.length - h, n - j);
      bool same = true;
      for (uint64_t t = 0; t < overlap && same; ++t) same = conv.at(h + t).hash == keys.hashes[j + t];
      if (!same) continue;
      uint64_t verbatim = 0;
      while (verbatim < overlap && conv.exact[h + verbatim] == keys.exact[j + verbatim]) ++verbatim;
      return Window{h, j, verbatim};
    }
  }
  return std::nullopt;
}

// Where a later window recognised by content sits in the stored history: the history index
// of the first of its messages the history has (`front`), and its first message the stored
// history does not have. Only when the request carries every stored message from `front`
// to the end verbatim (the last reply included) — an edit there is no window. The request's
// first few messages may be no stored message (tool results whose call the window dropped,
// changed by history repair): they are older than `front` and not sent.
struct WindowFit {
  uint64_t front = 0;
  size_t new_from = 0;
};

// Whether one of the request's messages before `j` is a stored message before `h`: then the
// client still sends what a window starting at `h` would drop (an edit after it, or a deletion
// in the middle), and it is no window.
bool carries_older(const Conversation& conv, const RequestKeys& keys, size_t after_system, size_t j,
                   uint64_t h) {
  for (size_t i = after_system; i < j; ++i) {
    for (uint64_t g = after_system; g < h; ++g) {
      if (conv.exact[g] == keys.exact[i]) return true;
    }
  }
  return false;
}

std::optional<WindowFit> fit_window(const Conversation& conv, const RequestKeys& keys, size_t after_system) {
  const size_t n = keys.exact.size();
  if (n <= after_system || conv.exact.size() != conv.length) return std::nullopt;
  for (size_t j = after_system; j < n && j < after_system + kWindowStarts; ++j) {
    for (uint64_t h = conv.system ? 2 : 1; h < conv.length; ++h) {
      if (conv.exact[h] != keys.exact[j]) continue;
      const uint64_t rest = conv.length - h;
      if (n - j < rest) continue;
      bool same = true;
      for (uint64_t t = 1; t < rest && same; ++t) same = conv.exact[h + t] == keys.exact[j + t];
      // Fewer messages before the overlap than the history has: a window dropped some. As
      // many is an edit of the first ones (the client's version is sent).
      if (same && j < h && !carries_older(conv, keys, after_system, j, h)) {
        return WindowFit{h, j + static_cast<size_t>(rest)};
      }
    }
  }
  return std::nullopt;
}

// Whether the request has a user, system or developer message in [from, to).
bool asks_before(const json& messages, size_t from, size_t to) {
  for (size_t i = from; i < to && i < messages.size(); ++i) {
    if (is_role(messages[i], "user") || is_role(messages[i], "system") || is_role(messages[i], "developer")) return true;
  }
  return false;
}

// Index of the request's newest user message (the size when it has none).
size_t newest_user(const json& messages) {
  for (size_t i = messages.size(); i > 0; --i) {
    if (is_role(messages[i - 1], "user")) return i - 1;
  }
  return messages.size();
}

struct Carried {
  uint64_t k = 0;                         // messages the request repeats
  std::vector<std::string> volatile_now;  // current versions of pinned lines of messages after the system
};

// The stored conversation's messages the request repeats: the common prefix of the two
// chains, cut at the first message whose exact content differs — unless only its volatile
// values did (pin_volatile_message(), when pinning is on; the stored version stays and its
// current lines are returned) before the request's newest user message (the note goes there). The system message with string content is left to
// take_system().
Carried carried_prefix(const Conversation& conv, const json& messages, const RequestKeys& keys, bool system_pinnable,
                       bool pin) {
  Carried c;
  uint64_t k = 0;
  while (k < keys.chain.size() && k < conv.chain.size() && keys.chain[k] == conv.chain[k]) ++k;
  const size_t newest = newest_user(messages);
  for (uint64_t i = 0; i < k; ++i) {
    if (i == 0 && system_pinnable) continue;
    if (conv.exact[i] == keys.exact[i]) continue;
    // Compacted away (before the cut) and changed only in volatile values (the chains agree):
    // it is not sent again. What stands for it, the summary, stays only with evidence (below).
    if (i > 0 && i < conv.first_kept()) continue;
    // The newest user message is what the model answers now: its values are never pinned.
    if (pin && i >= conv.first_kept() && i < newest) {
      if (auto lines = pin_volatile_message(conv.at(i).message, messages[static_cast<size_t>(i)], messages[newest])) {
        c.volatile_now.insert(c.volatile_now.end(), lines->begin(), lines->end());
        continue;
      }
    }
    c.k = i;
    return c;
  }
  c.k = k;
  return c;
}

void set_cause(Intake& in, BreakCause cause, std::string detail) {
  if (in.cause) return;  // the first reason is the one that broke the prefix
  in.cause = cause;
  in.cause_detail = std::move(detail);
}

// A request recognised as a window that is none (fit_window() found no front deletion): the
// first message where it departs from the stored history, and whether the client deleted
// messages there (its message there is a later stored one) or rewrote one.
void set_departure_cause(Intake& in, const Conversation& stored, const RequestKeys& keys,
                         size_t after_system) {
  const size_t n = keys.exact.size();
  size_t k = after_system;
  while (k < n && k < stored.exact.size() && keys.exact[k] == stored.exact[k]) ++k;
  const bool deleted = k < n && std::find(stored.exact.begin() + static_cast<std::ptrdiff_t>(k),
                                          stored.exact.end(), keys.exact[k]) != stored.exact.end();
  if (!deleted) {
    set_cause(in, BreakCause::kClientEdit, fmt::format("client history differs from message {}", k));
    return;
  }
  in.conversation.client_windows = true;
  set_cause(in, BreakCause::kClientTruncation,
            k > after_system ? fmt::format("the client dropped messages from message {}", k)
                             : std::string("the client dropped its oldest turns"));
}

// The system message: volatile lines stay pinned at their first values (evidence required),
// the current values are returned for the note.
void take_system(Intake& in, const json& messages, const StabiliserOptions& options) {
  Conversation& conv = in.conversation;
  if (!conv.system || !has_string_system(messages)) return;
  const std::string current = messages[0]["content"].get<std::string>();
  if (current == conv.pinned_system) return;
  if (options.pin_volatile_lines && in.evidence != Evidence::kNone) {
    PinResult pin = pin_volatile_lines(conv.pinned_system, current);
    if (!pin.edited) {
      in.volatile_now.insert(in.volatile_now.begin(), pin.current.begin(), pin.current.end());
      return;
    }
  }
  conv.pinned_system = current;
  conv.system->message = messages[0];
  conv.exact[0] = exact_hash(messages[0]);
  set_cause(in, BreakCause::kVolatileLine,
            options.pin_volatile_lines ? "the system message's volatile values changed" : "the system message changed");
}

// The note with the current values goes on the newest user message. A retry adds nothing and
// still gets today's values. A request that only goes on after a repeated user message (tool
// results, the turns of one question) keeps that message's note: the values of when it was
// asked, so the engine's cached prefix reaches the new messages instead of every tool turn
// recomputing the whole loop.
void place_note(Intake& in, const json& messages) {
  if (in.volatile_now.empty()) return;
  Conversation& conv = in.conversation;
  const std::string note = volatile_note(in.volatile_now);
  for (uint64_t i = conv.length; i > conv.first_kept(); --i) {
    if (!is_role(conv.at(i - 1).message, "user")) continue;
    auto it = conv.notes.find(i - 1);
    if (it != conv.notes.end() && it->second == note) return;
    if (it != conv.notes.end() && i - 1 < in.first_new && conv.length > in.first_new) return;
    if (i - 1 < in.first_new) set_cause(in, BreakCause::kVolatileLine, "the current values changed on a repeated request");
    conv.notes[i - 1] = note;
    return;
  }
  // No user message to carry the note: the values are sent where the client put them.
  conv.pinned_system = messages[0]["content"].get<std::string>();
  conv.system->message = messages[0];
  in.volatile_now.clear();
  set_cause(in, BreakCause::kVolatileLine, "no user message to carry the current values");
}

}  // namespace

const char* evidence_name(Evidence e) {
  switch (e) {
    case Evidence::kNone: return "none";
    case Evidence::kClientId: return "client_id";
    case Evidence::kHistoryEcho: return "history_echo";
  }
  return "?";
}

Intake take_in(const Conversation& stored, const IntakeRequest& request, const StabiliserOptions& options) {
  Intake in;
  const json& messages = request.messages;
  const RequestKeys& keys = request.keys;
  const size_t n = messages.size();
  const size_t after_system = !messages.empty() && is_role(messages[0], "system") ? 1 : 0;
  in.conversation = stored;
  Conversation& conv = in.conversation;
  in.evidence = request.named ? Evidence::kClientId : Evidence::kNone;
  size_t new_from = 0;

  if (request.window && !request.named) {
    // Recognised by content as a later window: the slot and its cache are this session's;
    // what the request carries of the kept history is kept.
    // A window carries only part of the last request: no evidence for state beyond the
    // messages it carries verbatim (pinned values and their notes are set aside).
    const auto fit = stored.length > 0 ? fit_window(stored, keys, after_system) : std::nullopt;
    if (fit && after_system == 1 && stored.system) {
      conv.client_windows = true;
      in.window_kept = true;
      if (!conv.notes.empty()) {
        conv.notes.clear();
        set_cause(in, BreakCause::kVolatileLine, "notes of earlier values set aside for a window");
      }
      if (conv.summary) {
        conv.summary.reset();
        set_cause(in, BreakCause::kClientTruncation, "the summary stood for messages the client no longer sends");
      }
      if (fit->front > conv.first_kept()) {
        conv.drop_front(fit->front);
        in.window_front_moved = true;
        set_cause(in, BreakCause::kClientTruncation, "the client dropped messages kvgate still sent");
      }
      new_from = fit->new_from;
    } else if (stored.length > 0) {
      conv = fresh_from(stored);
      in.restarted = true;
      in.evidence = Evidence::kHistoryEcho;  // as recognition found it (the slot is this session's)
      set_departure_cause(in, stored, keys, after_system);
    }
  } else {
    const bool pinnable = after_system == 1 && has_string_system(messages) && conv.system.has_value();
    Carried carried = carried_prefix(conv, messages, keys, pinnable, options.pin_volatile_lines);
    const uint64_t k = carried.k;
    // Same conversation: the request repeats the session's whole last request verbatim, and
    // that history holds an assistant turn (or the request goes on with our reply to it).
    const uint64_t last = request.stored_request_messages;
    if (in.evidence == Evidence::kNone && last > 0 && k >= last &&
        (conv.has_assistant_before(last) || (k > last && conv.replies.count(last) != 0))) {
      in.evidence = Evidence::kHistoryEcho;
    }
    std::optional<Window> window;
    if (request.named && options.continue_truncated_history && k <= after_system && conv.length > after_system) {
      window = align_window(conv, keys, std::max<size_t>(after_system, 1));
    }
    // A window has dropped messages: fewer before the overlap than the kept history has. As
    // many or more is an edit of earlier messages (the client's version is sent). A user or
    // system message before the overlap is the request's own content, which the kept history
    // would replace: no window either (only tool results whose call the window dropped are).
    if (window && window->overlap > 0 && window->request < window->history &&
        !asks_before(messages, after_system, window->request)) {
      // The client dropped its oldest turns of a conversation it named: continue the kept
      // history (content of this conversation's earlier requests).
      if (window->overlap < conv.length - window->history) conv.truncate(window->history + window->overlap);
      new_from = window->request + static_cast<size_t>(window->overlap);
      in.window_continued = true;
    } else if (in.evidence == Evidence::kNone && stored.length > 0) {
      conv = fresh_from(stored);
      in.restarted = true;
      if (k < stored.length && !(k + 1 == stored.length && k == n)) {
        set_cause(in, BreakCause::kClientEdit, fmt::format("client history differs from message {}", k));
      }
    } else {
      if (k < conv.length) {
        // Edited, regenerated, volatile values changed, or our reply dropped for a retry.
        if (!(k + 1 == conv.length && k == n)) {
          set_cause(in, BreakCause::kClientEdit, fmt::format("client history differs from message {}", k));
        }
        conv.truncate(k);
      }
      new_from = static_cast<size_t>(k);
      in.volatile_now = std::move(carried.volatile_now);  // evidence: the pinned messages stay
    }
  }
  if (new_from > 0) take_system(in, messages, options);
  in.first_new = conv.length;
  for (size_t i = new_from; i < n; ++i) conv.append(messages[i]);
  conv.tools = keys.tools;
  place_note(in, messages);
  return in;
}

}  // namespace kvgate::session
