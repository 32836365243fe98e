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

}  // namespace

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
  std::string out = "\n\n[kvgate: current values of lines in the system prompt:";
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
