#include "rescue/history_repair.h"

#include <set>

#include <fmt/format.h>

#include "rescue/relaxed_json.h"

namespace kvgate::rescue {
namespace {

using nlohmann::json;

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string shorten(std::string_view s, size_t n = 60) {
  if (s.size() <= n) return sanitize_utf8(s);
  return sanitize_utf8(s.substr(0, n)) + "...";
}

bool shallow(const json& v) { return json_depth_within(v, kRepairMaxDepth); }

std::string shown(const json& v) {
  if (!json_depth_within(v, 8)) return "(nested value)";
  return shorten(dump_json(v));
}

bool is_string(const json& m, const char* key) {
  auto it = m.find(key);
  return it != m.end() && it->is_string();
}

std::string wrap_raw(std::string_view raw_key, std::string_view text) {
  json w = json::object();
  w[std::string(raw_key)] = sanitize_utf8(text);
  return dump_json(w);
}

class Repairer {
 public:
  explicit Repairer(const HistoryRepairOptions& o) : opt_(o) {}

  json messages(json in) {
    if (!in.is_array()) return in;
    json out = json::array();
    for (size_t i = 0; i < in.size(); ++i) {
      index_ = static_cast<int>(i);
      json& msg = in[i];
      if (!msg.is_object() || !is_string(msg, "role")) {
        out.push_back(std::move(msg));
        continue;
      }
      fix_fields(msg);
      const std::string role = msg["role"].get<std::string>();
      bool keep = true;
      if (role == "assistant") {
        keep = assistant(msg);
      } else if (role == "tool") {
        tool_result(msg);
      } else if (role == "system" && !out.empty() && opt_.convert_late_system_messages) {
        msg["role"] = "user";
        add(RepairKind::kSystemMessageMoved, path("role"), "system -> user");
      }
      if (keep) out.push_back(std::move(msg));
    }
    return out;
  }

  json tools(json in) {
    if (!in.is_array()) return in;
    index_ = -1;
    json out = json::array();
    for (size_t k = 0; k < in.size(); ++k) {
      tool_ = static_cast<int>(k);
      json& t = in[k];
      if (tool(t)) out.push_back(std::move(t));
    }
    return out;
  }

  std::vector<HistoryRepair> take() { return std::move(repairs_); }

 private:
  void add(RepairKind kind, std::string p, std::string detail) {
    repairs_.push_back(HistoryRepair{kind, index_, index_ < 0 ? tool_ : -1, std::move(p), std::move(detail)});
  }
  std::string path(std::string_view rest) const {
    return index_ >= 0 ? fmt::format("messages[{}].{}", index_, rest) : fmt::format("tools[{}].{}", tool_, rest);
  }

  // Fields every role may carry: content, reasoning_content, name, tool_call_id.
  void fix_fields(json& m) {
    for (const char* key : {"reasoning_content", "name", "tool_call_id"}) {
      auto it = m.find(key);
      if (it == m.end() || it->is_string()) continue;
      const RepairKind kind = std::string_view(key) == "tool_call_id" ? RepairKind::kToolCallIdFixed
                                                                      : RepairKind::kFieldFixed;
      if (it->is_null()) {
        m.erase(it);
        add(kind, path(key), "null -> removed");
      } else if (shallow(*it)) {
        std::string text = dump_json(*it);
        add(kind, path(key), shown(*it) + " -> string");
        *it = std::move(text);
      }
    }
    auto c = m.find("content");
    if (c == m.end() || c->is_string() || c->is_null()) return;
    if (!shallow(*c)) return;
    if (c->is_array()) {
      fix_parts(*c);
      return;
    }
    std::string text = dump_json(*c);
    add(RepairKind::kContentFixed, path("content"), shown(*c) + " -> string");
    *c = std::move(text);
  }

  // An array content is a list of typed parts; strings and {"text"} objects become text
  // parts; anything else makes the whole array its JSON text.
  void fix_parts(json& parts) {
    bool typed = true;
    for (const auto& p : parts) typed = typed && p.is_object() && is_string(p, "type");
    if (typed) return;
    json fixed = json::array();
    for (const auto& p : parts) {
      if (p.is_object() && (is_string(p, "type") || is_string(p, "text"))) {
        json q = p;
        if (!q.contains("type")) q["type"] = "text";
        fixed.push_back(std::move(q));
      } else if (p.is_string()) {
        fixed.push_back({{"type", "text"}, {"text", p}});
      } else {
        std::string text = dump_json(parts);
        add(RepairKind::kContentFixed, path("content"), shown(parts) + " -> string");
        parts = std::move(text);
        return;
      }
    }
    add(RepairKind::kContentFixed, path("content"), "untyped parts -> text parts");
    parts = std::move(fixed);
  }

  // Returns false when the message is dropped.
  bool assistant(json& m) {
    auto tc = m.find("tool_calls");
    if (tc != m.end() && tc->is_object()) {
      *tc = json::array({*tc});
      add(RepairKind::kToolCallsFixed, path("tool_calls"), "object -> [object]");
    } else if (tc != m.end() && !tc->is_array() && !tc->is_null()) {
      add(RepairKind::kToolCallsFixed, path("tool_calls"), shown(*tc) + " -> removed");
      m.erase(tc);
    }
    tc = m.find("tool_calls");
    if (tc != m.end() && tc->is_array()) {
      json kept = json::array();
      for (size_t j = 0; j < tc->size(); ++j) {
        json& call = (*tc)[j];
        // A call that came without a usable id is answered by position, whatever id the
        // repair gives it.
        const bool had_id = call.is_object() && is_string(call, "id");
        if (!repair_call(call, j)) continue;
        any_call_ = true;
        if (!had_id) call_without_id_ = true;
        if (is_string(call, "id")) ids_.insert(call["id"].get<std::string>());
        kept.push_back(std::move(call));
      }
      *tc = std::move(kept);
    }
    if (!m.contains("content") && !m.contains("tool_calls")) {
      m["content"] = "";
      add(RepairKind::kContentAdded, path("content"), "missing -> \"\"");
    }
    if (opt_.drop_empty_assistant_turns && empty_turn(m)) {
      add(RepairKind::kEmptyAssistantDropped, fmt::format("messages[{}]", index_), "empty assistant turn");
      return false;
    }
    return true;
  }

  static bool empty_turn(const json& m) {
    auto tc = m.find("tool_calls");
    if (tc != m.end() && tc->is_array() && !tc->empty()) return false;
    auto r = m.find("reasoning_content");
    if (r != m.end() && r->is_string() && !trim(r->get_ref<const std::string&>()).empty()) return false;
    auto c = m.find("content");
    if (c == m.end() || c->is_null()) return true;
    if (c->is_string()) return trim(c->get_ref<const std::string&>()).empty();
    return c->is_array() && c->empty();
  }

  // Returns false when the call is dropped.
  bool repair_call(json& call, size_t j) {
    const std::string at = fmt::format("tool_calls[{}]", j);
    if (!call.is_object()) {
      add(RepairKind::kCallDropped, path(at), shown(call) + ": not an object");
      return false;
    }
    auto fn = call.find("function");
    if ((fn == call.end() || !fn->is_object()) && is_string(call, "name")) {
      // A flat call {"id", "name", "arguments"}: move its fields under "function".
      json f = {{"name", std::move(call["name"])}};
      if (call.contains("arguments")) f["arguments"] = std::move(call["arguments"]);
      call.erase("name");
      call.erase("arguments");
      call["function"] = std::move(f);
      add(RepairKind::kCallTypeSet, path(at + ".function"), "flat call -> function object");
      fn = call.find("function");
    }
    if (fn == call.end() || !fn->is_object() || !is_string(*fn, "name") ||
        (*fn)["name"].get_ref<const std::string&>().empty()) {
      add(RepairKind::kCallDropped, path(at), "no function name");
      return false;
    }
    auto type = call.find("type");
    if (type == call.end() || !type->is_string() || *type != "function") {
      add(RepairKind::kCallTypeSet, path(at + ".type"),
          (type == call.end() ? std::string("missing") : shown(*type)) + " -> \"function\"");
      call["type"] = "function";
    }
    RepairKind kind{};
    auto args = fn->find("arguments");
    const json* arguments = args == fn->end() ? nullptr : &*args;
    if (auto fixed = repair_arguments(arguments, opt_.raw_key, &kind)) {
      add(kind, path(at + ".function.arguments"),
          (arguments ? shown(*arguments) : std::string("missing")) + " -> " + shorten(*fixed));
      (*fn)["arguments"] = std::move(*fixed);
    }
    auto id = call.find("id");
    if (id != call.end() && !id->is_string()) {
      // A number keeps its digits (results that quote it as a number get the same text);
      // anything else is removed, which the engine accepts (results then match by position).
      if (id->is_number()) {
        std::string text = dump_json(*id);
        add(RepairKind::kCallIdFixed, path(at + ".id"), shown(*id) + " -> \"" + text + "\"");
        *id = std::move(text);
      } else {
        add(RepairKind::kCallIdFixed, path(at + ".id"), shown(*id) + " -> removed");
        call.erase(id);
      }
    }
    return true;
  }

  void tool_result(json& m) {
    if (!opt_.repair_orphan_tool_results) return;
    auto id = m.find("tool_call_id");
    const bool has_id = id != m.end() && id->is_string();
    const bool orphan = !any_call_ || (has_id && !call_without_id_ && !ids_.count(id->get<std::string>()));
    if (!orphan) return;
    std::string label = has_id ? "[tool result for " + id->get<std::string>() + "]" : "[tool result]";
    add(RepairKind::kOrphanToolResult, path("role"),
        has_id ? "no earlier call with id " + shorten(id->get<std::string>()) : "no earlier tool call");
    auto c = m.find("content");
    if (c != m.end() && c->is_array()) {
      c->insert(c->begin(), json{{"type", "text"}, {"text", label}});
    } else {
      std::string text = (c != m.end() && c->is_string()) ? c->get<std::string>() : std::string();
      m["content"] = label + "\n" + text;
    }
    m["role"] = "user";
    m.erase("tool_call_id");
    m.erase("name");
  }

  // Returns false when the tool is dropped.
  bool tool(json& t) {
    if (!t.is_object()) {
      add(RepairKind::kToolDropped, fmt::format("tools[{}]", tool_), "not an object");
      return false;
    }
    auto fn = t.find("function");
    if ((fn == t.end() || !fn->is_object()) && is_string(t, "name")) {
      json f = json::object();
      for (auto& [k, v] : t.items()) {
        if (k != "type" && k != "function") f[k] = std::move(v);
      }
      json type = t.contains("type") ? std::move(t["type"]) : json("function");
      t = json{{"type", std::move(type)}, {"function", std::move(f)}};
      add(RepairKind::kToolFixed, path("function"), "flat tool -> function object");
      fn = t.find("function");
    }
    if (fn == t.end() || !fn->is_object() || !is_string(*fn, "name") ||
        (*fn)["name"].get_ref<const std::string&>().empty()) {
      add(RepairKind::kToolDropped, fmt::format("tools[{}]", tool_), "no function name");
      return false;
    }
    auto type = t.find("type");
    if (type == t.end()) {
      t["type"] = "function";
      add(RepairKind::kToolFixed, path("type"), "missing -> \"function\"");
    } else if (!type->is_string() || *type != "function") {
      add(RepairKind::kToolDropped, fmt::format("tools[{}]", tool_), "type " + shown(*type));
      return false;
    }
    auto d = fn->find("description");
    if (d != fn->end() && !d->is_string() && shallow(*d)) {
      std::string text = d->is_null() ? std::string() : dump_json(*d);
      add(RepairKind::kToolFixed, path("function.description"), shown(*d) + " -> string");
      *d = std::move(text);
    }
    return true;
  }

  const HistoryRepairOptions& opt_;
  std::vector<HistoryRepair> repairs_;
  int index_ = -1;
  int tool_ = -1;
  std::set<std::string> ids_;    // ids of the calls seen so far
  bool any_call_ = false;        // a tool call was seen
  bool call_without_id_ = false;  // a call without an id was seen (results match it by position)
};

}  // namespace

std::string_view repair_kind_name(RepairKind kind) {
  switch (kind) {
    case RepairKind::kArgumentsEmpty: return "arguments_empty";
    case RepairKind::kArgumentsClosed: return "arguments_closed";
    case RepairKind::kArgumentsRelaxed: return "arguments_relaxed";
    case RepairKind::kArgumentsWrapped: return "arguments_wrapped";
    case RepairKind::kArgumentsNotObject: return "arguments_not_object";
    case RepairKind::kArgumentsMissing: return "arguments_missing";
    case RepairKind::kCallIdFixed: return "call_id_fixed";
    case RepairKind::kCallTypeSet: return "call_type_set";
    case RepairKind::kCallDropped: return "call_dropped";
    case RepairKind::kToolCallsFixed: return "tool_calls_fixed";
    case RepairKind::kToolCallIdFixed: return "tool_call_id_fixed";
    case RepairKind::kFieldFixed: return "field_fixed";
    case RepairKind::kContentFixed: return "content_fixed";
    case RepairKind::kContentAdded: return "content_added";
    case RepairKind::kOrphanToolResult: return "orphan_tool_result";
    case RepairKind::kSystemMessageMoved: return "system_message_moved";
    case RepairKind::kEmptyAssistantDropped: return "empty_assistant_dropped";
    case RepairKind::kToolFixed: return "tool_fixed";
    case RepairKind::kToolDropped: return "tool_dropped";
  }
  return "unknown";
}

std::optional<std::string> repair_arguments(const json* arguments, std::string_view raw_key, RepairKind* kind) {
  RepairKind ignored{};
  RepairKind& k = kind ? *kind : ignored;
  if (!arguments) {
    k = RepairKind::kArgumentsMissing;
    return "{}";
  }
  if (arguments->is_object()) return std::nullopt;
  if (arguments->is_null()) {
    k = RepairKind::kArgumentsNotObject;
    return "{}";
  }
  if (!arguments->is_string()) {
    if (!shallow(*arguments)) return std::nullopt;
    k = RepairKind::kArgumentsWrapped;
    return wrap_raw(raw_key, dump_json(*arguments));
  }
  const std::string& s = arguments->get_ref<const std::string&>();
  if (auto strict = parse_strict_json(s)) {
    if (strict->is_object()) return std::nullopt;
    k = RepairKind::kArgumentsNotObject;
    if (strict->is_null()) return "{}";
    if (strict->is_string()) {
      const std::string& inner = strict->get_ref<const std::string&>();
      if (auto nested = parse_strict_json(inner); nested && nested->is_object()) return inner;
    }
    return wrap_raw(raw_key, s);
  }
  if (trim(s).empty()) {
    k = RepairKind::kArgumentsEmpty;
    return "{}";
  }
  if (auto closed = close_truncated_json(s)) {
    if (auto v = parse_strict_json(*closed); v && v->is_object()) {
      k = RepairKind::kArgumentsClosed;
      return closed;
    }
  }
  if (auto relaxed = parse_relaxed_value(s, 0, {}); relaxed.ok() && relaxed->value.is_object() &&
                                                   trim(std::string_view(s).substr(relaxed->end)).empty()) {
    k = RepairKind::kArgumentsRelaxed;
    return dump_json(relaxed->value);
  }
  k = RepairKind::kArgumentsWrapped;
  return wrap_raw(raw_key, s);
}

RepairedHistory repair_history(json messages, json tools, const HistoryRepairOptions& options) {
  Repairer r(options);
  RepairedHistory out;
  out.messages = r.messages(std::move(messages));
  out.tools = r.tools(std::move(tools));
  out.repairs = r.take();
  return out;
}

}  // namespace kvgate::rescue
