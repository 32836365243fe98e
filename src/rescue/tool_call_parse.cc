#include "rescue/tool_call_parse.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "rescue/relaxed_json.h"
#include "rescue/tool_call_formats.h"

namespace kvgate::rescue {
namespace {

using nlohmann::json;
using formats::BodyRead;
using formats::Finder;
using formats::RawCall;
using formats::trim;

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kToolCall = "<tool_call>";
constexpr std::string_view kToolCallEnd = "</tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kLfmStart = "<|tool_call_start|>";
constexpr std::string_view kLfmEnd = "<|tool_call_end|>";
constexpr std::string_view kFence = "```";
constexpr size_t kMaxProseJsonAttempts = 64;
constexpr size_t npos = std::string_view::npos;

// A stretch of the visible text that holds calls (or looked like it did).
struct Group {
  size_t begin = 0;
  size_t end = 0;
  BodyRead read;
  bool unterminated = false;  // its closing marker was missing
};

const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// Splits <think> blocks off. Reasoning pieces are trimmed and joined with newlines.
void split_reasoning(std::string_view t, std::string& visible, std::string& reasoning) {
  std::vector<std::string_view> pieces;
  size_t pos = 0;
  size_t first_open = t.find(kThinkOpen);
  size_t first_close = t.find(kThinkClose);
  if (first_close != npos && (first_open == npos || first_close < first_open)) {
    pieces.push_back(t.substr(0, first_close));  // the prompt opened the block
    pos = first_close + kThinkClose.size();
  }
  while (pos < t.size()) {
    size_t open = t.find(kThinkOpen, pos);
    if (open == npos) {
      visible += t.substr(pos);
      break;
    }
    visible += t.substr(pos, open - pos);
    size_t body = open + kThinkOpen.size();
    size_t close = t.find(kThinkClose, body);
    if (close == npos) {
      pieces.push_back(t.substr(body));
      break;
    }
    pieces.push_back(t.substr(body, close - body));
    pos = close + kThinkClose.size();
  }
  for (auto p : pieces) {
    p = trim(p);
    if (p.empty()) continue;
    if (!reasoning.empty()) reasoning += '\n';
    reasoning += p;
  }
}

// Calls behind explicit markers, in text order. `any_marker` tells whether a marker occurs.
std::vector<Group> marker_groups(std::string_view v, bool& any_marker) {
  std::vector<Group> groups;
  Finder tc(v, kToolCall), tc_end(v, kToolCallEnd), fn(v, kFunction), fn_end(v, kFunctionEnd),
      lfm(v, kLfmStart), lfm_end(v, kLfmEnd);
  size_t pos = 0;
  while (pos < v.size()) {
    size_t a = tc.next(pos), b = fn.next(pos), c = lfm.next(pos);
    size_t at = std::min({a, b, c});
    if (at == npos) break;
    any_marker = true;
    Group g;
    g.begin = at;
    if (at == a || at == c) {
      const bool hermes = at == a;
      size_t body = at + (hermes ? kToolCall.size() : kLfmStart.size());
      size_t close = hermes ? tc_end.next(body) : lfm_end.next(body);
      size_t next_open = std::min(tc.next(body), lfm.next(body));
      size_t body_end = std::min({close, next_open, v.size()});
      g.unterminated = close == npos || close != body_end;
      g.end = g.unterminated ? body_end : close + (hermes ? kToolCallEnd.size() : kLfmEnd.size());
      std::string_view text = v.substr(body, body_end - body);
      std::string_view head = trim(text);
      if (head.substr(0, kFunction.size()) == kFunction) {
        g.read = formats::read_xml_functions(text);
      } else if (hermes || head.substr(0, 1) == "{" || head.substr(0, 3) == kFence ||
                 (head.substr(0, 1) == "[" && trim(head.substr(1)).substr(0, 1) == "{")) {
        g.read = formats::read_json_calls(text, /*allow_truncated=*/true);
      } else {
        g.read = formats::read_python_calls(text, /*allow_truncated=*/true);
      }
      // Inside <tool_call>, an XML function's missing </function> is the call's missing end.
      if (g.read.unterminated && !g.read.calls.empty() && g.read.calls[0].values_are_text) {
        g.unterminated = true;
      }
      if (g.read.unterminated && !hermes) g.unterminated = true;
    } else {
      size_t close = fn_end.next(at + kFunction.size());
      size_t next_open = std::min({tc.next(at + 1), lfm.next(at + 1), fn.next(at + 1)});
      g.end = (close != npos && close < next_open) ? close + kFunctionEnd.size()
                                                   : std::min(next_open, v.size());
      g.read = formats::read_xml_functions(v.substr(at, g.end - at));
      g.unterminated = g.read.unterminated;
    }
    groups.push_back(std::move(g));
    pos = groups.back().end;
  }
  return groups;
}

// Fenced blocks and bare JSON in prose: only used when no marker occurs.
std::vector<Group> plain_json_groups(std::string_view v, bool allow_truncated) {
  std::vector<Group> groups;
  size_t attempts = 0;
  auto scan_prose = [&](size_t from, size_t to) {
    size_t p = from;
    while (p < to && attempts < kMaxProseJsonAttempts) {
      size_t q = v.substr(0, to).find_first_of("{[", p);
      if (q == npos) return;
      ++attempts;
      auto parsed = parse_relaxed_value(v.substr(0, to), q, {.allow_truncated = allow_truncated});
      if (!parsed.ok()) {
        p = q + 1;
        continue;
      }
      auto calls = formats::calls_from_json(parsed->value, /*require_arguments=*/true);
      if (!calls.empty()) {
        Group g;
        g.begin = q;
        g.end = parsed->end;
        g.read.calls = std::move(calls);
        g.read.truncated = parsed->truncated;
        g.read.relaxed = parsed->relaxed;
        for (const auto& c : g.read.calls) g.read.relaxed = g.read.relaxed || c.relaxed;
        groups.push_back(std::move(g));
      }
      p = std::max(parsed->end, q + 1);
    }
  };
  size_t pos = 0;
  while (pos < v.size()) {
    size_t open = v.find(kFence, pos);
    if (open == npos) {
      scan_prose(pos, v.size());
      break;
    }
    scan_prose(pos, open);
    size_t body = v.find('\n', open);
    size_t close = body == npos ? npos : v.find(kFence, body);
    size_t end = close == npos ? v.size() : close + kFence.size();
    if (body != npos) {
      std::string_view inner = v.substr(body, (close == npos ? v.size() : close) - body);
      auto read = formats::read_json_calls(inner, allow_truncated, /*require_arguments=*/true);
      if (!read.calls.empty() && read.leftover.empty()) {
        Group g;
        g.begin = open;
        g.end = end;
        g.read = std::move(read);
        g.unterminated = close == npos;
        groups.push_back(std::move(g));
      }
    }
    pos = end;
  }
  return groups;
}

// Maps Python positional arguments to parameter names: the schema's `required` list when
// it has exactly as many names, else its only property.
bool map_positional(RawCall& call, const json& schema) {
  if (call.positional.empty()) return true;
  std::vector<std::string> names;
  const json* req = member(schema, "required");
  const json* props = member(schema, "properties");
  if (req && req->is_array() && req->size() == call.positional.size()) {
    for (const auto& n : *req) {
      if (!n.is_string()) return false;
      names.push_back(n.get<std::string>());
    }
  } else if (props && props->is_object() && props->size() == 1 && call.positional.size() == 1) {
    for (const auto& item : props->items()) names.push_back(item.key());
  } else {
    return false;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (!call.arguments.contains(names[i])) call.arguments[names[i]] = std::move(call.positional[i]);
  }
  call.positional.clear();
  return true;
}

std::string shown_name(std::string_view name) {
  std::string s = sanitize_utf8(name.substr(0, 80));
  return name.size() > 80 ? s + "..." : s;
}

class Assembler {
 public:
  Assembler(std::string_view visible, const json& tools, const ToolCallParseOptions& o,
            std::vector<CallNote>& notes)
      : v_(visible), tools_(tools), opt_(o), notes_(notes) {}

  void add(Group& g) {
    current_ += v_.substr(cursor_, g.begin - cursor_);
    cursor_ = g.end;
    std::string_view span = v_.substr(g.begin, g.end - g.begin);
    if (g.read.calls.empty()) {
      note(CallIssue::kInvalidCall, -1, g.read.error);
      current_ += span;
      return;
    }
    if (g.read.truncated && !opt_.accept_truncated) {
      note(CallIssue::kTruncated, -1, "left as text");
      current_ += span;
      return;
    }
    int first = -1;
    for (auto& call : g.read.calls) {
      int kept = keep(call);
      if (first < 0) first = kept;
    }
    if (first < 0) {  // nothing kept: the whole group stays text
      current_ += span;
      return;
    }
    if (g.unterminated) note(CallIssue::kUnterminated, first, "closing marker missing");
    if (g.read.truncated) note(CallIssue::kTruncated, first, "closed and kept");
    if (g.read.relaxed) note(CallIssue::kRepairedJson, first, "lenient JSON");
    flush();
    pieces_.push_back(std::move(g.read.leftover));
  }

  json finish(std::string_view reasoning) {
    current_ += v_.substr(std::min(cursor_, v_.size()));
    flush();
    std::string content;
    for (const auto& p : pieces_) {
      std::string_view t = trim(p);
      if (t.empty()) continue;
      if (!content.empty()) content += '\n';
      content += t;
    }
    json msg = {{"role", "assistant"}};
    content = sanitize_utf8(content);
    if (calls_.empty()) {
      msg["content"] = content;
    } else {
      msg["content"] = content.empty() ? json(nullptr) : json(content);
    }
    if (!reasoning.empty()) msg["reasoning_content"] = sanitize_utf8(reasoning);
    if (!calls_.empty()) msg["tool_calls"] = std::move(calls_);
    return msg;
  }

 private:
  // Validates one call; returns its index in tool_calls, or -1 when it was not kept.
  int keep(RawCall& call) {
    if (calls_.size() >= opt_.max_calls) {
      note(CallIssue::kTooManyCalls, -1, shown_name(call.name));
      return -1;
    }
    bool normalized = false;
    const ToolSet::Tool* tool = tools_.resolve(call.name, &normalized);
    if (!tool) {
      note(CallIssue::kUnknownTool, -1, shown_name(call.name));
      return -1;
    }
    if (!map_positional(call, tool->parameters)) {
      note(CallIssue::kInvalidCall, -1, tool->name + ": positional arguments without names");
      return -1;
    }
    int index = static_cast<int>(calls_.size());
    if (normalized) note(CallIssue::kNameNormalized, index, shown_name(call.name) + " -> " + tool->name);
    json args = coerce_arguments(std::move(call.arguments), tool->parameters, call.values_are_text,
                                 index, notes_);
    calls_.push_back({{"id", opt_.id_prefix + std::to_string(opt_.first_id + calls_.size())},
                      {"type", "function"},
                      {"function", {{"name", tool->name}, {"arguments", dump_json(args)}}}});
    return index;
  }

  void note(CallIssue issue, int call, std::string detail) {
    notes_.push_back(CallNote{issue, call, std::move(detail)});
  }

  void flush() {
    pieces_.push_back(std::move(current_));
    current_.clear();
  }

  std::string_view v_;
  ToolSet tools_;
  const ToolCallParseOptions& opt_;
  std::vector<CallNote>& notes_;
  size_t cursor_ = 0;
  std::string current_;
  std::vector<std::string> pieces_;
  json calls_ = json::array();
};

}  // namespace

size_t ToolCallParseResult::call_count() const {
  auto it = message.find("tool_calls");
  return (it != message.end() && it->is_array()) ? it->size() : 0;
}

bool ToolCallParseResult::has_issue(CallIssue issue) const {
  return std::any_of(notes.begin(), notes.end(), [&](const CallNote& n) { return n.issue == issue; });
}

ToolCallParseResult parse_tool_calls(std::string_view raw, const json& tools,
                                     const ToolCallParseOptions& options) {
  ToolCallParseResult result;
  std::string_view text = raw;
  if (text.size() > options.max_input_bytes) {
    result.notes.push_back(CallNote{CallIssue::kInputTruncated, -1,
                                    fmt::format("read {} of {} bytes", options.max_input_bytes, raw.size())});
    text = text.substr(0, options.max_input_bytes);
  }
  std::string visible, reasoning;
  if (options.extract_reasoning) {
    split_reasoning(text, visible, reasoning);
  } else {
    visible = std::string(text);
  }
  bool any_marker = false;
  std::vector<Group> groups = marker_groups(visible, any_marker);
  if (!any_marker) groups = plain_json_groups(visible, /*allow_truncated=*/true);
  Assembler assembler(visible, tools, options, result.notes);
  for (auto& g : groups) assembler.add(g);
  result.message = assembler.finish(reasoning);
  return result;
}

}  // namespace kvgate::rescue
