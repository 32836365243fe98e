#include "testing/isolation_oracle.h"

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "session/compactor.h"
#include "session/normalize.h"
#include "session/stabiliser.h"
#include "util/json.h"

namespace kvgate::testing {

using session::CompactionOptions;
using session::RequestKeys;
using session::StabiliserOptions;
using session::build_view;
using session::compact;
using session::exact_hash;
using session::mask_volatile;
using session::message_hash;
using session::message_text;
using session::recognition_keys;
using session::take_in;

using nlohmann::json;

namespace {

const std::string kNoteHead(session::kVolatileNoteHead);
const std::string kSummaryHead = "[Summary of the earlier conversation, written by kvgate";
const std::string kMarkerHead = "\n[… ";
const std::string kMarkerTail = " tokens elided by kvgate …]\n";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool is_system(const json& m) { return m.is_object() && m.value("role", "") == "system"; }

std::string system_text(const json& messages) {
  if (messages.empty() || !is_system(messages[0]) || !messages[0]["content"].is_string()) return "";
  return messages[0]["content"].get<std::string>();
}

// Splits kvgate's note off a text: the text before it, and the note's lines.
std::pair<std::string, std::vector<std::string>> split_note(const std::string& text) {
  const size_t at = text.find(kNoteHead);
  if (at == std::string::npos) return {text, {}};
  std::string note = text.substr(at + kNoteHead.size());
  if (!note.empty() && note.back() == ']') note.pop_back();
  auto lines = lines_of(note);
  if (!lines.empty() && lines.front().empty()) lines.erase(lines.begin());
  return {text.substr(0, at), lines};
}

std::string quoted(const std::string& text) {
  return util::json_text(json(text));
}

// `v` without kvgate's volatile-values note (its lines go to `note_lines`).
json without_note(json v, std::vector<std::string>& note_lines) {
  auto strip = [&](const std::string& text) {
    auto [before, lines] = split_note(text);
    note_lines.insert(note_lines.end(), lines.begin(), lines.end());
    return before;
  };
  if (v.contains("content") && v["content"].is_string()) {
    v["content"] = strip(v["content"].get<std::string>());
  } else if (v.contains("content") && v["content"].is_array() && !v["content"].empty()) {
    auto& last = v["content"].back();
    if (last.is_object() && last.value("text", "").rfind(kNoteHead, 0) == 0) {
      strip(last["text"].get<std::string>());
      v["content"].erase(v["content"].size() - 1);
    }
  }
  return v;
}

// Whether `v` (note removed) is `candidate` truncated by kvgate: head + marker + tail.
bool truncated_from(json v, const json& candidate) {
  if (!v["content"].is_string() || !candidate.contains("content") || !candidate["content"].is_string()) return false;
  const std::string text = v["content"].get<std::string>();
  const size_t m = text.find(kMarkerHead);
  const size_t e = m == std::string::npos ? m : text.find(kMarkerTail, m);
  if (e == std::string::npos) return false;
  const std::string head = text.substr(0, m);
  const std::string tail = text.substr(e + kMarkerTail.size());
  const std::string whole = candidate["content"].get<std::string>();
  if (whole.size() < head.size() + tail.size() || whole.compare(0, head.size(), head) != 0 ||
      whole.compare(whole.size() - tail.size(), tail.size(), tail) != 0) {
    return false;
  }
  v["content"] = whole;
  return exact_hash(v) == exact_hash(candidate);
}

// exact_hash() of each message, message_hash() for a leading system message (its volatile
// values may differ between requests of one conversation).
std::vector<uint64_t> hashes_of(const json& messages) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    out.push_back(i == 0 && is_system(messages[i]) ? message_hash(messages[i]) : exact_hash(messages[i]));
  }
  return out;
}

std::vector<uint64_t> masked_of(const json& messages) {
  std::vector<uint64_t> out;
  for (const auto& m : messages) out.push_back(message_hash(m));
  return out;
}

// Index of the newest user message (the size when there is none).
size_t newest_user(const json& messages) {
  for (size_t i = messages.size(); i > 0; --i) {
    if (messages[i - 1].value("role", "") == "user") return i - 1;
  }
  return messages.size();
}

// A message kvgate may keep at an earlier version that differs only in volatile values.
bool is_pinnable(const json& m) {
  const std::string role = m.value("role", "");
  return (role == "user" || role == "system" || role == "developer") && !m.contains("tool_calls");
}

}  // namespace

MiniGateway::MiniGateway(size_t max_sessions, uint64_t high) : table_(max_sessions), high_(high) {
  table_.set_loader({.find = [this](uint64_t key) -> std::optional<std::string> {
                       auto it = keys_.find(key);
                       return it == keys_.end() ? std::nullopt : std::optional<std::string>(it->second);
                     },
                     .load = [this](const std::string& id) -> std::shared_ptr<Session> {
                       auto it = saved_.find(id);
                       if (it == saved_.end()) return nullptr;
                       auto s = std::make_shared<Session>(id, it->second.scope, it->second.named);
                       s->conversation = it->second.conversation;
                       s->chain = s->conversation.chain;
                       s->last_request_messages = it->second.request_messages;
                       return s;
                     }});
}

MiniGateway::Turn MiniGateway::send(const std::string& scope, const std::optional<std::string>& id,
                                    const json& messages, const json& reply, uint64_t tools) {
  Turn t;
  const RequestKeys keys = RequestKeys::of(messages, tools);
  auto match = table_.find_or_create(scope, keys, id);
  t.session = match.session;
  t.how = match.how;
  std::unique_lock turn(t.session->turn);
  uint64_t stored_request_messages = 0;
  {
    std::lock_guard lock(t.session->mu);
    stored_request_messages = t.session->last_request_messages;
  }
  t.intake = take_in(t.session->conversation,
                     {.messages = messages,
                      .keys = keys,
                      .named = t.session->explicit_id,
                      .window = match.how == "window",
                      .stored_request_messages = stored_request_messages},
                     StabiliserOptions{});
  Conversation conv = t.intake.conversation;
  t.view = build_view(conv);
  auto tokens = [](const json& v) -> Result<uint64_t> {
    return util::json_text(v).size() / 4;
  };
  if (high_ > 0 && *tokens(t.view) > high_) {
    CompactionOptions o{.l1_threshold_tokens = high_ / 3, .l1_keep_tokens = high_ / 8, .summary_max_tokens = 4096};
    auto r = compact(
        conv, high_ / 2, t.intake.first_new, tokens, [](const std::string& s) -> Result<uint64_t> { return s.size() / 4; },
        [](const Conversation& c, uint64_t until, uint64_t) -> Result<std::string> { return traceable_summary(c, until); },
        o);
    if (r.ok()) {
      conv = std::move(r->conversation);
      t.view = build_view(conv);
    }
  }
  const uint64_t request_messages = conv.length;
  conv.append_reply(reply);
  t.session->conversation = conv;
  {
    std::lock_guard lock(t.session->mu);
    t.session->chain = conv.chain;
    t.session->last_request_messages = request_messages;
  }
  const auto k = recognition_keys(scope, t.session->explicit_id, conv, request_messages);
  table_.set_keys(t.session, k);
  saved_[t.session->id] = {t.session->scope, t.session->explicit_id, conv, request_messages};
  std::erase_if(keys_, [&](const auto& kv) { return kv.second == t.session->id; });
  for (uint64_t key : k) keys_[key] = t.session->id;
  return t;
}

std::string traceable_summary(const Conversation& c, uint64_t until) {
  std::string out;
  if (c.summary) out = c.summary->text;
  for (uint64_t i = c.first_kept(); i < until && i < c.length; ++i) {
    if (!out.empty()) out += "\n";
    out += quoted(message_text(c.at(i).message));
  }
  return out;
}

void IsolationOracle::answered(const std::string& scope, const std::optional<std::string>& id, const json& messages,
                               const json& reply, const std::string& thread) {
  log_.push_back({scope, id, thread, messages, reply, hashes_of(messages), masked_of(messages), exact_hash(reply)});
}

std::string IsolationOracle::check_complete(const json& messages, const json& view) {
  size_t at = 0;  // the next view message to look at
  for (size_t i = !messages.empty() && is_system(messages[0]) ? 1 : 0; i < messages.size(); ++i) {
    const uint64_t want = exact_hash(messages[i]);
    bool found = false;
    std::vector<std::string> ignored;
    for (; at < view.size() && !found; ++at) {
      const json bare = without_note(view[at], ignored);
      found = exact_hash(bare) == want || truncated_from(bare, messages[i]);
    }
    if (!found) return fmt::format("request message {} does not reach the engine: {}", i, util::json_text(messages[i]).substr(0, 300));
  }
  return "";
}

std::vector<const IsolationOracle::Answered*> IsolationOracle::ancestors(const std::string& scope,
                                                                         const std::optional<std::string>& id,
                                                                         const std::string& thread,
                                                                         const json& messages) const {
  const std::vector<uint64_t> exact = hashes_of(messages);
  const std::vector<uint64_t> masked = masked_of(messages);
  const size_t newest = newest_user(messages);
  // The request carries a's messages verbatim (the system message, and the system, user and
  // developer messages before the newest user message, up to volatile values).
  auto carries = [&](const Answered& a) {
    const size_t n = a.exact.size();
    if (n == 0 || exact.size() < n) return false;
    for (size_t i = 0; i < n; ++i) {
      if (a.exact[i] == exact[i]) continue;
      if (i < newest && is_pinnable(messages[i]) && a.masked[i] == masked[i]) continue;
      return false;
    }
    return true;
  };
  // Ancestors: requests whose messages this request carries whole, when that history has an
  // assistant turn, or this request carries the reply kvgate gave it.
  std::vector<const Answered*> out;
  for (const auto& a : log_) {
    if (a.scope != scope) continue;
    if (id && a.id == id && a.thread == thread) {
      out.push_back(&a);
      continue;
    }
    if (!carries(a)) continue;
    const size_t n = a.exact.size();
    const bool reply = exact.size() > n && a.reply_exact == exact[n];
    bool assistant = false;
    for (size_t i = 1; i < n && !assistant; ++i) assistant = a.messages[i].value("role", "") == "assistant";
    if (reply || assistant) out.push_back(&a);
  }
  return out;
}

std::string IsolationOracle::check(const std::string& scope, const std::optional<std::string>& id,
                                   const json& messages, const json& view, const std::string& thread) const {
  const auto family = ancestors(scope, id, thread, messages);
  const std::vector<uint64_t> masked = masked_of(messages);
  const size_t newest = newest_user(messages);
  std::vector<const json*> allowed;
  for (const auto& m : messages) allowed.push_back(&m);
  std::set<std::string> allowed_lines;  // system lines (for pinned values and notes)
  for (const auto& l : lines_of(system_text(messages))) allowed_lines.insert(l);
  std::set<std::string> texts;          // message texts, quoted as summaries hold them
  for (const auto& m : messages) texts.insert(quoted(message_text(m)));
  for (const auto& m : messages) {
    for (const auto& l : lines_of(message_text(m))) allowed_lines.insert(l);
  }
  std::vector<const json*> pinned;  // ancestors' earlier messages R has up to volatile values
  for (const Answered* a : family) {
    for (const auto& l : lines_of(system_text(a->messages))) allowed_lines.insert(l);
    for (const auto& m : a->messages) {
      if (!is_pinnable(m)) continue;
      for (const auto& l : lines_of(message_text(m))) allowed_lines.insert(l);  // notes kept on earlier turns
    }
    for (size_t i = 0; i < newest && i < a->messages.size(); ++i) {
      if (is_pinnable(messages[i]) && a->masked[i] == masked[i]) pinned.push_back(&a->messages[i]);
    }
    if (id && a->id == id && a->thread == thread) {
      for (const auto& m : a->messages) allowed.push_back(&m), texts.insert(quoted(message_text(m)));
      allowed.push_back(&a->reply);
      texts.insert(quoted(message_text(a->reply)));
    }
  }
  std::set<uint64_t> allowed_exact;
  for (const json* a : allowed) allowed_exact.insert(exact_hash(*a));
  for (const json* a : pinned) allowed_exact.insert(exact_hash(*a));
  std::vector<std::string> note_lines;
  auto check_summary = [&](const std::string& text) -> std::string {
    const size_t nl = text.find('\n');
    for (const auto& line : lines_of(nl == std::string::npos ? "" : text.substr(nl + 1))) {
      if (texts.count(line) == 0) return "summary line not from this request: " + line;
    }
    return "";
  };
  for (size_t i = 0; i < view.size(); ++i) {
    const json& v = view[i];
    if (i == 0 && is_system(v) && v["content"].is_string() && !system_text(messages).empty()) {
      std::string sys = v["content"].get<std::string>();
      if (const size_t s = sys.find("\n\n" + kSummaryHead); s != std::string::npos) {
        if (auto e = check_summary(sys.substr(s + 2)); !e.empty()) return e;
        sys = sys.substr(0, s);
      }
      const std::string mine = system_text(messages);
      if (sys == mine) continue;
      if (mask_volatile(sys) != mask_volatile(mine)) return "system message is not this request's: " + sys.substr(0, 200);
      for (const auto& l : lines_of(sys)) {
        if (allowed_lines.count(l) == 0) return "pinned system line from another conversation: " + l;
      }
      continue;
    }
    if (v.value("role", "") == "user" && v["content"].is_string() && v["content"].get<std::string>().rfind(kSummaryHead, 0) == 0) {
      if (auto e = check_summary(v["content"].get<std::string>()); !e.empty()) return e;
      continue;
    }
    const json bare = without_note(v, note_lines);
    bool found = allowed_exact.count(exact_hash(bare)) != 0;
    for (size_t a = 0; a < allowed.size() && !found; ++a) found = truncated_from(bare, *allowed[a]);
    if (!found) return fmt::format("view message {} is not from this request: {}", i, quoted(util::json_text(v)).substr(0, 300));
  }
  for (const auto& l : note_lines) {
    if (allowed_lines.count(l) == 0) return "note line not from this conversation: " + l;
  }
  // The current values reach the model: each line of this request's system message is in
  // the view's system message or in a note. A request that goes on after its newest user
  // message (tool results, more turns of one question) may keep that question's note instead,
  // with the values of when it was asked (intake.h): the same line up to volatile values.
  if (!view.empty() && is_system(view[0]) && view[0]["content"].is_string() && !system_text(messages).empty()) {
    const auto sent = lines_of(view[0]["content"].get<std::string>());
    const std::set<std::string> sent_lines(sent.begin(), sent.end());
    const std::set<std::string> noted(note_lines.begin(), note_lines.end());
    std::set<std::string> noted_masked;
    for (const auto& l : note_lines) noted_masked.insert(mask_volatile(l));
    const bool goes_on = newest + 1 < messages.size();
    for (const auto& l : lines_of(system_text(messages))) {
      if (sent_lines.count(l) != 0 || noted.count(l) != 0) continue;
      if (goes_on && noted_masked.count(mask_volatile(l)) != 0) continue;
      return "current system line does not reach the model: " + l;
    }
  }
  return "";
}

}  // namespace kvgate::testing
