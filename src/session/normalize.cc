#include "session/normalize.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>

#include "util/json.h"

namespace kvgate::session {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

size_t count_while(std::string_view s, size_t i, bool (*pred)(char)) {
  size_t n = 0;
  while (i + n < s.size() && pred(s[i + n])) ++n;
  return n;
}

// Each matcher returns the length of its pattern at position i (0 = no match).
size_t match_uuid(std::string_view s, size_t i) {
  static constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  size_t pos = i;
  for (size_t g = 0; g < 5; ++g) {
    if (count_while(s, pos, is_hex) < kGroups[g]) return 0;
    pos += kGroups[g];
    if (g < 4) {
      if (pos >= s.size() || s[pos] != '-') return 0;
      ++pos;
    }
  }
  if (pos < s.size() && is_hex(s[pos])) return 0;
  return pos - i;
}

size_t match_date(std::string_view s, size_t i) {
  // 2026-11-29, 2026/11/29, 2026.11.29, 2026年11月29日
  if (count_while(s, i, is_digit) != 4) return 0;
  size_t pos = i + 4;
  if (s.substr(pos, 3) == "年") {
    pos += 3;
    const size_t m = count_while(s, pos, is_digit);
    if (m < 1 || m > 2 || s.substr(pos + m, 3) != "月") return 0;
    pos += m + 3;
    const size_t d = count_while(s, pos, is_digit);
    if (d < 1 || d > 2) return 0;
    pos += d;
    if (s.substr(pos, 3) == "日") pos += 3;
    return pos - i;
  }
  if (pos >= s.size() || (s[pos] != '-' && s[pos] != '/' && s[pos] != '.')) return 0;
  const char sep = s[pos++];
  const size_t m = count_while(s, pos, is_digit);
  if (m < 1 || m > 2 || pos + m >= s.size() || s[pos + m] != sep) return 0;
  pos += m + 1;
  const size_t d = count_while(s, pos, is_digit);
  if (d < 1 || d > 2) return 0;
  return pos + d - i;
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// The length of the word in `names` (a full name or its three-letter abbreviation) at i.
size_t match_name(std::string_view s, size_t i, std::initializer_list<std::string_view> names) {
  const size_t n = count_while(s, i, is_letter);
  const std::string_view word = s.substr(i, n);
  for (std::string_view name : names) {
    if (word == name || (n == 3 && word == name.substr(0, 3))) return n;
  }
  return 0;
}

size_t match_month(std::string_view s, size_t i) {
  return match_name(s, i, {"January", "February", "March", "April", "May", "June", "July", "August", "September",
                           "October", "November", "December"});
}

// "Wednesday, December 2, 2026", "December 2, 2026", "Dec 2nd 2026" (the weekday alone is
// not a date).
size_t match_named_date(std::string_view s, size_t i) {
  size_t pos = i;
  if (const size_t w = match_name(s, pos, {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"});
      w != 0) {
    pos += w;
    if (pos < s.size() && s[pos] == ',') ++pos;
    if (pos >= s.size() || s[pos] != ' ') return 0;
    ++pos;
  }
  const size_t m = match_month(s, pos);
  if (m == 0 || pos + m >= s.size() || s[pos + m] != ' ') return 0;
  pos += m + 1;
  const size_t d = count_while(s, pos, is_digit);
  if (d < 1 || d > 2) return 0;
  pos += d;
  for (std::string_view suffix : {"st", "nd", "rd", "th"}) {
    if (s.substr(pos, 2) == suffix) pos += 2;
  }
  if (pos < s.size() && s[pos] == ',') ++pos;
  if (pos >= s.size() || s[pos] != ' ') return 0;
  ++pos;
  if (count_while(s, pos, is_digit) != 4) return 0;
  return pos + 4 - i;
}

size_t match_time(std::string_view s, size_t i) {
  // 10:02, 10:02:35, 10:02:35.123, optional Z / +08:00 after a full time
  const size_t h = count_while(s, i, is_digit);
  if (h < 1 || h > 2) return 0;
  size_t pos = i + h;
  int fields = 1;
  while (fields < 3 && pos < s.size() && s[pos] == ':' && count_while(s, pos + 1, is_digit) == 2) {
    pos += 3;
    ++fields;
  }
  if (fields < 2) return 0;
  if (pos < s.size() && (s[pos] == '.' || s[pos] == ',') && count_while(s, pos + 1, is_digit) > 0) {
    pos += 1 + count_while(s, pos + 1, is_digit);
  }
  if (pos < s.size() && s[pos] == 'Z') {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-') && count_while(s, pos + 1, is_digit) == 2 &&
             pos + 3 < s.size() && s[pos + 3] == ':' && count_while(s, pos + 4, is_digit) == 2) {
    pos += 6;
  }
  return pos - i;
}

size_t match_hex_id(std::string_view s, size_t i) {
  const size_t n = count_while(s, i, is_hex);
  if (n < 16) return 0;
  if (i + n < s.size() && is_word(s[i + n])) return 0;
  return n;
}

// A random identifier in base 62 or similar ("req_011CV5Jm8Y2xq4Pz7Rt9Kd3W", an API's request
// id): a word of 16 to 64 characters with at least three digits, three capitals and three
// small letters, or one of 12 or more letters and digits after a prefix APIs give their ids
// ("msg_", "toolu_", "call_", ...). Code identifiers (snake_case, camelCase with a digit or
// two) are not.
size_t match_random_id(std::string_view s, size_t i) {
  const size_t n = count_while(s, i, is_word);
  if (n < 16 || n > 64) return 0;
  static constexpr std::string_view kPrefixes[] = {"req_", "msg_", "toolu_", "call_", "resp_",
                                                   "run_", "evt_", "sess_", "trace_", "span_", "srvtoolu_"};
  for (std::string_view p : kPrefixes) {
    if (s.substr(i, p.size()) != p) continue;
    const size_t rest = count_while(s, i + p.size(), [](char c) { return is_digit(c) || is_letter(c); });
    if (p.size() + rest == n && rest >= 12) return n;
  }
  size_t digits = 0, upper = 0, lower = 0;
  for (size_t k = i; k < i + n; ++k) {
    const char c = s[k];
    digits += is_digit(c) ? 1U : 0U;
    upper += c >= 'A' && c <= 'Z' ? 1U : 0U;
    lower += c >= 'a' && c <= 'z' ? 1U : 0U;
  }
  return digits >= 3 && upper >= 3 && lower >= 3 ? n : 0;
}

size_t match_long_number(std::string_view s, size_t i) {
  const size_t n = count_while(s, i, is_digit);
  return n >= 10 ? n : 0;
}

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

const std::string* part_text(const nlohmann::json& part) {
  if (!part.is_object()) return nullptr;
  auto t = part.find("text");
  return t != part.end() && t->is_string() ? &t->get_ref<const std::string&>() : nullptr;
}

// Whether a content array has a text part that is not a volatile reminder.
bool has_lasting_text(const nlohmann::json& content) {
  for (const auto& part : content) {
    if (const std::string* t = part_text(part); t != nullptr && !is_volatile_reminder(*t)) return true;
  }
  return false;
}

void append_text_content(const nlohmann::json& content, bool mask, std::string& out) {
  auto text = [mask](const std::string& s) { return mask ? mask_volatile(s) : s; };
  if (content.is_string()) {
    out += text(content.get_ref<const std::string&>());
  } else if (content.is_array()) {
    const bool skip_reminders = mask && has_lasting_text(content);
    for (const auto& part : content) {
      if (!part.is_object()) continue;
      if (const std::string* t = part_text(part); t != nullptr) {
        if (skip_reminders && is_volatile_reminder(*t)) continue;
        out += text(*t);
      } else {
        // Images, audio, files: what they are is content (two requests with different images
        // are different messages), so the whole part is part of the identity.
        out += "[" + util::json_text(part) + "]";
      }
    }
  }
}

}  // namespace

bool is_volatile_reminder(std::string_view text) {
  constexpr size_t kMaxLines = 3;
  constexpr size_t kMaxBytes = 512;
  if (text.size() > kMaxBytes || static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) >= kMaxLines) return false;
  return mask_volatile(text) != text;
}

std::string mask_volatile(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    // A token starts here: after a non-word character, or after the 'T' of an ISO timestamp.
    const bool boundary =
        i == 0 || !is_word(s[i - 1]) || (s[i - 1] == 'T' && i >= 2 && is_digit(s[i - 2]) && is_digit(s[i]));
    if (boundary && (is_hex(s[i]) || is_letter(s[i]))) {
      size_t n = 0;
      const char* tag = nullptr;
      if ((n = match_named_date(s, i)) != 0) {
        tag = "<date>";
      } else if ((n = match_random_id(s, i)) != 0) {
        tag = "<id>";
      } else if (!is_hex(s[i])) {
        // Only a named date starts with a letter other than a hex digit.
      } else if ((n = match_uuid(s, i)) != 0) {
        tag = "<uuid>";
      } else if ((n = match_date(s, i)) != 0) {
        tag = "<date>";
      } else if ((n = match_time(s, i)) != 0) {
        tag = "<time>";
      } else if ((n = match_hex_id(s, i)) != 0) {
        tag = "<hex>";
      } else if ((n = match_long_number(s, i)) != 0) {
        tag = "<num>";
      }
      if (tag != nullptr) {
        out += tag;
        i += n;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

std::string canonical_message(const nlohmann::json& m, bool mask) {
  std::string out;
  if (!m.is_object()) return "?";
  auto str = [&m](const char* key) -> std::string {
    auto it = m.find(key);
    return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  out += "role=" + str("role") + "\n";
  if (auto name = str("name"); !name.empty()) out += "name=" + name + "\n";
  out += "content=";
  if (auto c = m.find("content"); c != m.end()) append_text_content(*c, mask, out);
  out += "\n";
  if (auto calls = m.find("tool_calls"); calls != m.end() && calls->is_array()) {
    for (const auto& call : *calls) {
      if (!call.is_object()) continue;
      auto fn = call.find("function");
      if (fn == call.end() || !fn->is_object()) continue;
      out += "call=";
      if (auto name = fn->find("name"); name != fn->end() && name->is_string()) out += name->get<std::string>();
      out += "(";
      if (auto args = fn->find("arguments"); args != fn->end()) {
        if (args->is_string()) {
          auto parsed = nlohmann::json::parse(args->get_ref<const std::string&>(), nullptr, false);
          out += parsed.is_discarded() ? args->get<std::string>() : util::json_text(parsed);
        } else {
          out += util::json_text(*args);
        }
      }
      out += ")\n";
    }
  }
  if (!mask) {
    // Fields the masked form leaves out but that are content (anything but the ones clients
    // and engines vary freely), so the exact form tells every difference a model could see.
    nlohmann::json extra = nlohmann::json::object();
    for (const auto& [key, value] : m.items()) {
      if (key == "role" || key == "name" || key == "content" || key == "tool_calls" || key == "tool_call_id" ||
          key == "reasoning_content" || key == "reasoning" || key == "thinking") {
        continue;
      }
      extra[key] = value;
    }
    if (!extra.empty()) out += "extra=" + util::json_text(extra) + "\n";
  }
  return out;
}

uint64_t hash64(std::string_view data) {
  // FNV-1a over the bytes, then a splitmix64 finaliser for avalanche.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : data) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return mix(h ^ data.size());
}

uint64_t chain_step(uint64_t previous, uint64_t message) { return mix(previous * 0x9e3779b97f4a7c15ULL ^ message); }

uint64_t message_hash(const nlohmann::json& message) { return hash64(canonical_message(message, true)); }

uint64_t exact_hash(const nlohmann::json& message) { return hash64(canonical_message(message, false)); }

std::vector<uint64_t> chain_hashes(const nlohmann::json& messages) {
  std::vector<uint64_t> chain;
  if (!messages.is_array()) return chain;
  chain.reserve(messages.size());
  for (const auto& m : messages) extend_chain(chain, m);
  return chain;
}

void extend_chain(std::vector<uint64_t>& chain, const nlohmann::json& message) {
  extend_chain(chain, message_hash(message));
}

void extend_chain(std::vector<uint64_t>& chain, uint64_t message_hash) {
  chain.push_back(chain_step(chain.empty() ? 0x6b7667617465ULL : chain.back(), message_hash));
}

}  // namespace kvgate::session
