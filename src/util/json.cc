#include "util/json.h"

namespace kvgate::util {

std::string json_text_with(const nlohmann::json& object, const std::string& key, const nlohmann::json& value,
                           WrittenMember written) {
  std::string out = "{";
  bool first = true;
  auto member = [&](const std::string& k, const nlohmann::json& v) {
    if (!first) out += ',';
    first = false;
    out += json_text(nlohmann::json(k));
    out += ':';
    if (!written.text.empty() && k == written.key) {
      out += written.text;
    } else {
      out += json_text(v);
    }
  };
  bool placed = key.empty();
  // nlohmann::json keeps members sorted by key (std::map), as dump() writes them.
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (!placed && !(it.key() < key)) {
      member(key, value);
      placed = true;
      if (it.key() == key) continue;
    }
    member(it.key(), it.value());
  }
  if (!placed) member(key, value);
  out += '}';
  return out;
}

std::string json_text_with(const nlohmann::json& object, WrittenMember written) {
  return json_text_with(object, std::string(), nullptr, written);
}

size_t json_string_end(std::string_view text, size_t i) {
  for (++i; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_space(std::string_view text, size_t i) {
  while (i < text.size() && is_space(text[i])) ++i;
  return i;
}

// The end of the value that starts at text[i] (not a space): one past its last byte, or npos.
size_t value_end(std::string_view text, size_t i) {
  if (i >= text.size()) return std::string_view::npos;
  if (text[i] == '"') return json_string_end(text, i);
  if (text[i] != '{' && text[i] != '[') {
    while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != ']' && !is_space(text[i])) ++i;
    return i;
  }
  size_t depth = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      i = json_string_end(text, i);
      if (i == std::string_view::npos) return i;
      --i;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

}  // namespace

std::optional<std::string_view> member_text(std::string_view text, std::string_view key) {
  std::optional<std::string_view> found;
  size_t i = skip_space(text, 0);
  if (i >= text.size() || text[i] != '{') return std::nullopt;
  i = skip_space(text, i + 1);
  while (i < text.size() && text[i] == '"') {
    const size_t key_end = json_string_end(text, i);
    if (key_end == std::string_view::npos) return std::nullopt;
    const std::string_view name = text.substr(i + 1, key_end - i - 2);
    i = skip_space(text, key_end);
    if (i >= text.size() || text[i] != ':') return std::nullopt;
    i = skip_space(text, i + 1);
    const size_t end = value_end(text, i);
    if (end == std::string_view::npos) return std::nullopt;
    if (name == key) found = text.substr(i, end - i);
    i = skip_space(text, end);
    if (i < text.size() && text[i] == ',') i = skip_space(text, i + 1);
  }
  // Only an object that ends where it should: a cut text holds no member for sure.
  if (i >= text.size() || text[i] != '}') return std::nullopt;
  return found;
}

}  // namespace kvgate::util
