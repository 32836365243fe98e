#include "session/turn_log.h"

#include <algorithm>

#include "session/compactor.h"
#include "util/json.h"
#include "util/strings.h"

namespace kvgate::session {

using nlohmann::json;

namespace {


// What a reader recognises of a message: its text, then its tool calls.
std::string shown_text(const json& message) {
  std::string out = message_text(message);
  if (auto calls = message.find("tool_calls"); calls != message.end() && calls->is_array()) {
    for (const auto& call : *calls) {
      const json fn = call.is_object() ? call.value("function", json::object()) : json::object();
      const json name = fn.is_object() ? fn.value("name", json()) : json();
      const json args = fn.is_object() ? fn.value("arguments", json()) : json();
      out += "\n[tool call " + (name.is_string() ? name.get<std::string>() : util::json_text(name)) + " " +
             (args.is_string() ? args.get<std::string>() : util::json_text(args)) + "]";
    }
  }
  return out;
}

std::optional<std::string> role_of(const json& view, size_t i) {
  if (!view.is_array() || i >= view.size()) return std::nullopt;
  const json& m = view[i];
  if (m.is_object() && m.contains("role") && m["role"].is_string()) return m["role"].get<std::string>();
  return std::string();
}

size_t first_difference(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

Excerpt excerpt(const std::string& text, size_t at, size_t context) {
  // min: in invalid UTF-8 (a long run of continuation bytes) the next boundary may lie past `at`.
  const size_t start = std::min(at, util::utf8_ceil(text, at > context ? at - context : 0));
  const size_t end = util::utf8_floor(text, std::min(text.size(), at + context));
  return {.same = text.substr(start, at - start), .differs = at < end ? text.substr(at, end - at) : std::string()};
}

}  // namespace

PrefixBreak locate_break(const json& before, const json& after, const std::string& before_prompt,
                         const std::string& after_prompt, size_t context_bytes) {
  PrefixBreak b;
  const size_t nb = before.is_array() ? before.size() : 0;
  const size_t na = after.is_array() ? after.size() : 0;
  size_t i = 0;
  while (i < nb && i < na && before[i] == after[i]) ++i;
  b.message = i;
  b.role_before = role_of(before, i);
  b.role_after = role_of(after, i);
  if (!before_prompt.empty() && !after_prompt.empty()) b.prompt_byte = first_difference(before_prompt, after_prompt);
  if (i >= nb && i >= na) return b;  // identical views
  std::string tb = i < nb ? shown_text(before[i]) : std::string();
  std::string ta = i < na ? shown_text(after[i]) : std::string();
  if (i < nb && i < na && tb == ta) {  // the difference is in fields the text does not show
    tb = util::json_text(before[i]);
    ta = util::json_text(after[i]);
  }
  // The divergence, moved back to a character boundary valid in both texts.
  size_t at = first_difference(tb, ta);
  at = std::min(util::utf8_floor(tb, at), util::utf8_floor(ta, at));
  b.byte_in_message = at;
  b.before = excerpt(tb, at, context_bytes);
  b.after = excerpt(ta, at, context_bytes);
  return b;
}

uint64_t recomputed_tokens(uint64_t previous_prompt, uint64_t previous_reply, uint64_t prompt, uint64_t cached) {
  const uint64_t reusable = std::min(previous_prompt + previous_reply, prompt);
  return reusable > cached ? reusable - cached : 0;
}

json to_json(const TurnRecord& t, bool texts) {
  json j = {{"n", t.n},
            {"ts", t.ts_ms},
            {"status", t.status},
            {"messages", t.messages},
            {"view_messages", t.view_messages},
            {"slot", t.slot},
            {"recognised_by", t.recognised_by},
            {"prompt_tokens", t.prompt_tokens},
            {"cached_tokens", t.cached_tokens},
            {"prefilled_tokens", t.prefilled_tokens},
            {"completion_tokens", t.completion_tokens},
            {"recomputed_tokens", t.recomputed_tokens},
            {"ttft_ms", t.ttft_ms ? json(*t.ttft_ms) : json(nullptr)},
            {"total_ms", t.total_ms},
            {"compactions", t.compactions},
            {"break", nullptr}};
  if (const auto& b = t.prefix_break) {
    auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
    json jb = {{"cause", b->cause},
               {"detail", b->detail},
               {"message", b->message},
               {"role_before", opt(b->role_before)},
               {"role_after", opt(b->role_after)},
               {"byte_in_message", opt(b->byte_in_message)},
               {"prompt_byte", opt(b->prompt_byte)},
               {"recomputed_tokens", t.recomputed_tokens}};
    if (texts) {
      jb["before"] = {{"same", b->before.same}, {"differs", b->before.differs}};
      jb["after"] = {{"same", b->after.same}, {"differs", b->after.differs}};
    }
    j["break"] = std::move(jb);
  }
  return j;
}

const TurnRecord& TurnLog::add(TurnRecord record) {
  record.n = next_++;
  turns_.push_back(std::move(record));
  while (turns_.size() > capacity_) turns_.pop_front();
  return turns_.back();
}

const TurnRecord* TurnLog::find(uint64_t n) const {
  if (turns_.empty() || n < turns_.front().n || n > turns_.back().n) return nullptr;
  return &turns_[n - turns_.front().n];
}

json TurnLog::to_json() const {
  json out = json::array();
  for (const auto& t : turns_) out.push_back(session::to_json(t, false));
  return out;
}

json TurnLog::summary(size_t count) const {
  json out = json::array();
  const size_t from = turns_.size() > count ? turns_.size() - count : 0;
  for (size_t i = from; i < turns_.size(); ++i) {
    const auto& t = turns_[i];
    out.push_back({{"n", t.n},
                   {"prompt_tokens", t.prompt_tokens},
                   {"cached_tokens", t.cached_tokens},
                   {"prefilled_tokens", t.prefilled_tokens},
                   {"cause", t.prefix_break ? json(t.prefix_break->cause) : json(nullptr)}});
  }
  return out;
}

}  // namespace kvgate::session
