// libFuzzer target: the prefix-break inspector's data (turn_log.h). The input makes two views
// (the previous and this turn's messages: shared prefixes, edits at any byte, tool calls,
// dropped and added messages, multi-byte and invalid UTF-8) and a pair of renderings;
// locate_break and the turn record's JSON must not crash, the message index must be where
// the views first differ, the excerpts must be bounded and, for valid UTF-8 texts, whole
// characters, and the record must serialise (what GET /kvgate/v1/sessions/ID/turns/N sends).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "session/turn_log.h"

namespace {

using nlohmann::json;
using namespace kvgate::session;

void check(bool ok) {
  if (!ok) std::abort();
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

std::string text(FuzzedDataProvider& in) {
  static const char* kParts[] = {"The build is ", "green", "red", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                                 "<script>", "\n", "\xC3", "\xFF"};
  std::string out;
  const int n = in.ConsumeIntegralInRange(0, 12);
  for (int i = 0; i < n; ++i) {
    out += in.ConsumeBool() ? std::string(kParts[in.ConsumeIntegralInRange<size_t>(0, 9)])
                            : in.ConsumeRandomLengthString(40);
  }
  return out;
}

json message(FuzzedDataProvider& in) {
  static const char* kRoles[] = {"system", "user", "assistant", "tool"};
  json m = {{"role", kRoles[in.ConsumeIntegralInRange(0, 3)]}};
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: m["content"] = text(in); break;
    case 1: m["content"] = json::array({{{"type", "text"}, {"text", text(in)}}}); break;
    case 2: m["content"] = nullptr; break;
    default: break;
  }
  if (in.ConsumeBool()) {
    m["tool_calls"] = json::array({{{"id", "c1"},
                                    {"type", "function"},
                                    {"function", {{"name", text(in)}, {"arguments", text(in)}}}}});
  }
  if (in.ConsumeBool()) m["tool_call_id"] = text(in);
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  json before = json::array();
  const int n = in.ConsumeIntegralInRange(0, 6);
  for (int i = 0; i < n; ++i) before.push_back(message(in));
  json after = before;
  // Edit, drop or add messages.
  const int edits = in.ConsumeIntegralInRange(0, 3);
  for (int e = 0; e < edits; ++e) {
    const int op = in.ConsumeIntegralInRange(0, 2);
    if (op == 0 && !after.empty()) {
      after[in.ConsumeIntegralInRange<size_t>(0, after.size() - 1)] = message(in);
    } else if (op == 1 && !after.empty()) {
      after.erase(after.begin() + static_cast<std::ptrdiff_t>(in.ConsumeIntegralInRange<size_t>(0, after.size() - 1)));
    } else {
      after.push_back(message(in));
    }
  }
  const std::string before_prompt = text(in);
  const std::string after_prompt = text(in);
  const size_t context = in.ConsumeIntegralInRange<size_t>(0, 64);
  const PrefixBreak b = locate_break(before, after, before_prompt, after_prompt, context);
  size_t first = 0;
  while (first < before.size() && first < after.size() && before[first] == after[first]) ++first;
  check(b.message == first);
  check(b.role_before.has_value() == (first < before.size()));
  check(b.role_after.has_value() == (first < after.size()));
  for (const Excerpt* x : {&b.before, &b.after}) {
    check(x->same.size() <= context && x->differs.size() <= context);
  }
  check(b.before.same == b.after.same);
  // Whole characters when the texts are valid UTF-8 (JSON dumps of valid strings are too).
  auto all_valid = [](const json& view) { return valid_utf8(view.dump(-1, ' ', false, json::error_handler_t::replace)) &&
                                                 view.dump(-1, ' ', false, json::error_handler_t::ignore) ==
                                                     view.dump(-1, ' ', false, json::error_handler_t::replace); };
  if (all_valid(before) && all_valid(after)) {
    for (const Excerpt* x : {&b.before, &b.after}) check(valid_utf8(x->same) && valid_utf8(x->differs));
  }
  TurnRecord t;
  t.prefix_break = b;
  TurnLog log(2);
  log.add(t);
  log.add(t);
  log.add(std::move(t));
  check(log.find(1) == nullptr && log.find(3) != nullptr);
  const std::string out = to_json(*log.find(3), true).dump(-1, ' ', false, json::error_handler_t::replace);
  check(valid_utf8(out));
  return 0;
}
