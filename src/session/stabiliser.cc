#include "session/stabiliser.h"

#include <algorithm>
#include <map>

#include "session/normalize.h"

namespace kvgate::session {

using nlohmann::json;

namespace {

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t nl = s.find('\n', start);
    out.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

bool is_pinnable_role(const json& m) {
  if (!m.is_object()) return false;
  const std::string role = m.value("role", "");
  return (role == "user" || role == "system" || role == "developer") && !m.contains("tool_calls");
}

// The text parts of a content (a string is one part); nullopt when it has anything else.
std::optional<std::vector<std::string>> text_parts(const json& message) {
  auto c = message.find("content");
  if (c == message.end()) return std::nullopt;
  if (c->is_string()) return std::vector<std::string>{c->get<std::string>()};
  if (!c->is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& part : *c) {
    if (!part.is_object() || part.value("type", "text") != "text" || !part.contains("text") || !part["text"].is_string()) {
      return std::nullopt;
    }
    out.push_back(part["text"].get<std::string>());
  }
  return out;
}

// The message without its content, as exact_hash() sees it.
uint64_t fields_hash(json m) {
  m.erase("content");
  return exact_hash(m);
}

}  // namespace

std::optional<std::vector<std::string>> pin_volatile_message(const json& pinned, const json& current,
                                                             const json& newest_user) {
  if (!is_pinnable_role(pinned) || !is_pinnable_role(current) || fields_hash(pinned) != fields_hash(current)) {
    return std::nullopt;
  }
  const auto kept = text_parts(pinned);
  const auto now = text_parts(current);
  if (!kept || !now) return std::nullopt;
  std::vector<std::string> moved;  // masked texts of the newest user message's parts
  if (const auto newest = newest_user.is_object() ? text_parts(newest_user) : std::nullopt) {
    for (const auto& t : *newest) moved.push_back(mask_volatile(t));
  }
  std::vector<std::string> lines;
  size_t b = 0;
  for (const std::string& part : *kept) {
    if (b < now->size()) {
      PinResult r = pin_volatile_lines(part, (*now)[b]);
      if (!r.edited) {
        lines.insert(lines.end(), r.current.begin(), r.current.end());
        ++b;
        continue;
      }
    }
    if (is_volatile_reminder(part) && std::find(moved.begin(), moved.end(), mask_volatile(part)) != moved.end()) continue;
    return std::nullopt;
  }
  if (b != now->size()) return std::nullopt;
  return lines;
}

PinResult pin_volatile_lines(const std::string& pinned, const std::string& current) {
  PinResult r;
  if (pinned == current) {
    r.upstream = pinned;
    return r;
  }
  const auto a = split_lines(pinned);
  const auto b = split_lines(current);
  if (a.size() != b.size()) {
    r.upstream = current;
    r.edited = true;
    return r;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    if (mask_volatile(a[i]) != mask_volatile(b[i])) {
      r.upstream = current;
      r.edited = true;
      r.current.clear();
      return r;
    }
    r.current.push_back(b[i]);
  }
  r.upstream = pinned;
  return r;
}

std::string volatile_note(const std::vector<std::string>& lines) {
  std::string out = std::string(kVolatileNoteHead);
  for (const auto& l : lines) out += "\n" + l;
  return out + "]";
}

size_t reorder_tool_results(json& messages, size_t from) {
  if (!messages.is_array()) return 0;
  size_t groups = 0;
  for (size_t i = from; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object() || m.value("role", "") != "assistant" || !m.contains("tool_calls") || !m["tool_calls"].is_array()) {
      continue;
    }
    std::map<std::string, size_t> order;
    for (const auto& call : m["tool_calls"]) {
      if (call.is_object() && call.contains("id") && call["id"].is_string()) order.emplace(call["id"].get<std::string>(), order.size());
    }
    size_t end = i + 1;
    while (end < messages.size() && messages[end].is_object() && messages[end].value("role", "") == "tool") ++end;
    if (end - i - 1 < 2) continue;
    std::vector<json> results(messages.begin() + static_cast<long>(i + 1), messages.begin() + static_cast<long>(end));
    auto rank = [&](const json& t) {
      auto id = t.find("tool_call_id");
      if (id == t.end() || !id->is_string()) return order.size();
      auto it = order.find(id->get<std::string>());
      return it == order.end() ? order.size() : it->second;
    };
    std::vector<json> sorted = results;
    std::stable_sort(sorted.begin(), sorted.end(), [&](const json& x, const json& y) { return rank(x) < rank(y); });
    if (sorted != results) {
      std::copy(sorted.begin(), sorted.end(), messages.begin() + static_cast<long>(i + 1));
      ++groups;
    }
    i = end - 1;
  }
  return groups;
}

const char* cause_name(BreakCause cause) {
  switch (cause) {
    case BreakCause::kNone: return "none";
    case BreakCause::kClientEdit: return "client_edit";
    case BreakCause::kVolatileLine: return "volatile_line";
    case BreakCause::kToolReorder: return "tool_reorder";
    case BreakCause::kClientTruncation: return "client_truncation";
    case BreakCause::kCompaction: return "compaction";
    case BreakCause::kSlotEviction: return "slot_eviction";
    case BreakCause::kEngineRestart: return "engine_restart";
  }
  return "unknown";
}

size_t first_different_message(const json& before, const json& after) {
  if (!before.is_array() || !after.is_array()) return 0;
  const size_t n = std::min(before.size(), after.size());
  for (size_t i = 0; i < n; ++i) {
    if (before[i] != after[i]) return i;
  }
  return n;
}

size_t first_different_byte(const std::string& before, const std::string& after) {
  const auto mm = std::mismatch(before.begin(), before.end(), after.begin(), after.end());
  return static_cast<size_t>(mm.first - before.begin());
}

}  // namespace kvgate::session
