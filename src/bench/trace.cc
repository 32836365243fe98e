#include "bench/trace.h"

#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "http/content_coding.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

// zstd frames begin with these four bytes (RFC 8878, section 3.1.1).
constexpr std::string_view kZstdMagic = "\x28\xb5\x2f\xfd";

// The file's text; a zstd-compressed file (recognised by its magic, whatever its name) is
// decompressed.
Result<std::string> read_trace_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("cannot open trace {}", path.string()));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!bytes.starts_with(kZstdMagic)) return bytes;
  // No bound of its own: a trace is the operator's file (half of size_t keeps limit + 1 exact).
  auto text = http::decode_content("zstd", std::move(bytes), std::numeric_limits<size_t>::max() / 2);
  if (!text.ok()) return Error(fmt::format("trace {}: {}", path.string(), text.error().message));
  return std::move(text).value();
}

}  // namespace

Result<Trace> load_trace(const std::filesystem::path& path, size_t max_turns) {
  auto text = read_trace_text(path);
  if (!text.ok()) return text.error();
  std::istringstream in(std::move(*text));
  Trace t;
  t.name = (path.extension() == ".zst" ? path.stem() : path).stem().string();
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) return Error(fmt::format("{}:{}: not a JSON value", path.string(), line_no));
    if (!j.is_object())
      return Error(fmt::format("{}:{}: expected a JSON object (a chat request)", path.string(), line_no));
    if (j.contains("_meta")) {
      if (!t.turns.empty())
        return Error(fmt::format("{}:{}: _meta must be the first line", path.string(), line_no));
      t.meta = j["_meta"];
      if (t.meta.is_object() && t.meta.contains("name") && t.meta["name"].is_string())
        t.name = t.meta["name"];
      continue;
    }
    if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty()) {
      return Error(
          fmt::format("{}:{}: a chat request needs a non-empty messages array", path.string(), line_no));
    }
    t.turns.push_back(std::move(j));
    if (max_turns > 0 && t.turns.size() >= max_turns) break;
  }
  if (t.turns.empty()) return Error(fmt::format("trace {} has no requests", path.string()));
  return t;
}

LiveHistory live_history(const json& previous_trace, const json& previous_sent, const json& current_trace,
                         const std::optional<json>& reply) {
  LiveHistory out;
  out.messages = current_trace;
  if (!previous_trace.is_array() || !previous_sent.is_array() || !current_trace.is_array()) {
    out.reason = "not message arrays";
    return out;
  }
  const size_t prev = previous_trace.size();
  if (current_trace.size() <= prev) {
    out.reason = "the trace's history did not grow";
    return out;
  }
  for (size_t i = 1; i < prev; ++i) {
    if (current_trace[i] != previous_trace[i]) {
      out.reason = fmt::format("the trace changed message {} of its history", i);
      return out;
    }
  }
  json messages = previous_sent;
  if (!messages.empty() && current_trace[0].value("role", "") == "system" &&
      messages[0].value("role", "") == "system") {
    messages[0] = current_trace[0];
  }
  bool replaced = false;
  for (size_t i = prev; i < current_trace.size(); ++i) {
    json m = current_trace[i];
    if (!replaced && m.value("role", "") == "assistant") {
      replaced = true;
      if (reply && reply->is_object()) {
        json live = {{"role", "assistant"}, {"content", reply->value("content", json(""))}};
        if (live["content"].is_null()) live["content"] = "";
        if (reply->contains("reasoning_content")) live["reasoning_content"] = (*reply)["reasoning_content"];
        // Tool calls always come from the trace: its tool results answer them (tools are not run).
        if (m.contains("tool_calls")) live["tool_calls"] = m["tool_calls"];
        m = std::move(live);
      }
    }
    messages.push_back(std::move(m));
  }
  out.messages = std::move(messages);
  out.live = true;
  return out;
}

}  // namespace kvgate::bench
