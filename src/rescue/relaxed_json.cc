#include "rescue/relaxed_json.h"

#include <charconv>
#include <cstdint>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "util/json.h"

namespace kvgate::rescue {
namespace {

using nlohmann::json;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
}
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads `n` hex digits at `p`; -1 when any is missing or not hex.
long read_hex(std::string_view t, size_t p, size_t n) {
  if (p + n > t.size()) return -1;
  long v = 0;
  for (size_t i = 0; i < n; ++i) {
    int h = hex_value(t[p + i]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Length of the valid UTF-8 sequence at `p`, or 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view t, size_t p) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(t[p + i]); };
  unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (p + n > t.size()) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3Fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

// One parse step: a value, or the input ended before a usable value started (kCut, only
// with allow_truncated), or a syntax error.
struct Step {
  enum Kind { kValue, kCut, kError } kind = kValue;
  json value;
  std::string error;
};

class Reader {
 public:
  Reader(std::string_view text, size_t pos, const RelaxedOptions& options)
      : t_(text), p_(pos), opt_(options) {}

  Step value(size_t depth) {
    skip_space();
    if (p_ >= t_.size()) return eof("a value");
    char c = t_[p_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"' || c == '\'') {
      std::string s;
      if (!string_body(s)) return error("a closing quote");
      return Step{Step::kValue, json(std::move(s)), {}};
    }
    if (c == '-' || c == '+' || c == '.' || is_digit(c)) return number();
    if (is_ident_start(c)) return literal();
    return error("a value");
  }

  size_t pos() const { return p_; }
  bool relaxed() const { return relaxed_; }
  bool truncated() const { return truncated_; }

 private:
  Step error(std::string_view expected) {
    return Step{Step::kError, {}, fmt::format("offset {}: expected {}", p_, expected)};
  }
  Step eof(std::string_view expected) {
    if (!opt_.allow_truncated) {
      return Step{Step::kError, {}, fmt::format("offset {}: input ended, expected {}", p_, expected)};
    }
    truncated_ = true;
    return Step{Step::kCut, {}, {}};
  }

  void skip_space() {
    while (p_ < t_.size() && is_space(t_[p_])) ++p_;
  }

  // Reads a quoted string at p_ into `out`; false on a missing close quote (unless truncation
  // is allowed, which closes it after the last complete character or escape).
  bool string_body(std::string& out) {
    const char quote = t_[p_++];
    if (quote == '\'') relaxed_ = true;
    const size_t raw_start = out.size();
    bool raw_bytes = false;
    bool cut = false;
    while (p_ < t_.size() && !cut) {
      char c = t_[p_];
      if (c == quote) {
        ++p_;
        if (raw_bytes) sanitize_tail(out, raw_start);
        return true;
      }
      if (c != '\\') {
        if (static_cast<unsigned char>(c) < 0x20) relaxed_ = true;
        if (static_cast<unsigned char>(c) >= 0x80) raw_bytes = true;
        out += c;
        ++p_;
        continue;
      }
      cut = !escape(out);
    }
    if (!opt_.allow_truncated) return false;
    truncated_ = true;
    p_ = t_.size();
    if (raw_bytes) sanitize_tail(out, raw_start);
    return true;
  }

  // Decodes the escape at p_ (a backslash) into `out`; false when the text ends inside it.
  bool escape(std::string& out) {
    if (p_ + 1 >= t_.size()) return false;
    char e = t_[p_ + 1];
    p_ += 2;
    switch (e) {
      case '"': out += '"'; return true;
      case '\\': out += '\\'; return true;
      case '/': out += '/'; return true;
      case 'b': out += '\b'; return true;
      case 'f': out += '\f'; return true;
      case 'n': out += '\n'; return true;
      case 'r': out += '\r'; return true;
      case 't': out += '\t'; return true;
      case '\'': out += '\''; relaxed_ = true; return true;
      case 'u': {
        long u = read_hex(t_, p_, 4);
        if (u < 0) {
          if (p_ + 4 > t_.size()) return false;
          relaxed_ = true;
          out += "\\u";
          return true;
        }
        p_ += 4;
        auto cp = static_cast<uint32_t>(u);
        if (cp >= 0xD800 && cp <= 0xDBFF && p_ + 1 < t_.size() && t_[p_] == '\\' &&
            t_[p_ + 1] == 'u') {
          long lo = read_hex(t_, p_ + 2, 4);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<uint32_t>(lo) - 0xDC00);
            p_ += 6;
          }
        }
        append_utf8(out, cp);
        return true;
      }
      case 'x': {
        relaxed_ = true;
        long x = read_hex(t_, p_, 2);
        if (x < 0) {
          if (p_ + 2 > t_.size()) return false;
          out += "\\x";
          return true;
        }
        p_ += 2;
        append_utf8(out, static_cast<uint32_t>(x));
        return true;
      }
      default:  // unknown escape: kept as written, as Python does
        relaxed_ = true;
        out += '\\';
        out += e;
        return true;
    }
  }

  static void sanitize_tail(std::string& out, size_t from) {
    std::string_view tail(out.data() + from, out.size() - from);
    if (is_valid_utf8(tail)) return;
    std::string clean = sanitize_utf8(tail);
    out.resize(from);
    out += clean;
  }

  Step number() {
    size_t start = p_;
    if (t_[p_] == '+') {
      relaxed_ = true;
      ++start;
      ++p_;
    }
    while (p_ < t_.size() && (is_digit(t_[p_]) || t_[p_] == '-' || t_[p_] == '+' ||
                              t_[p_] == '.' || t_[p_] == 'e' || t_[p_] == 'E')) {
      ++p_;
    }
    std::string_view tok = t_.substr(start, p_ - start);
    bool at_end = p_ >= t_.size();
    if (auto strict = parse_strict_json(tok); strict && strict->is_number()) {
      return Step{Step::kValue, std::move(*strict), {}};
    }
    // Relaxed forms: "1.", ".5", "01", "-.5".
    double d = 0;
    auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), d);
    if (ec == std::errc() && ptr == tok.data() + tok.size() && !tok.empty() &&
        is_digit(tok.back())) {
      relaxed_ = true;
      return Step{Step::kValue, json(d), {}};
    }
    if (ec == std::errc() && ptr == tok.data() + tok.size() && !tok.empty() && tok.back() == '.' &&
        !at_end) {
      relaxed_ = true;
      return Step{Step::kValue, json(d), {}};
    }
    if (at_end) return eof("the rest of a number");
    p_ = start;
    return error("a number");
  }

  Step literal() {
    size_t start = p_;
    while (p_ < t_.size() && is_ident_char(t_[p_])) ++p_;
    std::string_view w = t_.substr(start, p_ - start);
    if (w == "true") return Step{Step::kValue, json(true), {}};
    if (w == "false") return Step{Step::kValue, json(false), {}};
    if (w == "null") return Step{Step::kValue, json(nullptr), {}};
    if (w == "True" || w == "False" || w == "None") {
      relaxed_ = true;
      if (w == "None") return Step{Step::kValue, json(nullptr), {}};
      return Step{Step::kValue, json(w == "True"), {}};
    }
    if (p_ >= t_.size()) {
      for (std::string_view full : {"true", "false", "null", "True", "False", "None"}) {
        if (full.substr(0, w.size()) == w) return eof("the rest of a literal");
      }
    }
    p_ = start;
    return error("a value");
  }

  // A key: a quoted string, or (relaxed) a bare identifier. False on error or cut.
  Step key() {
    char c = t_[p_];
    if (c == '"' || c == '\'') {
      std::string s;
      size_t before = p_;
      bool was_truncated = truncated_;
      if (!string_body(s)) return error("a closing quote");
      if (truncated_ && !was_truncated) {
        p_ = before;
        return Step{Step::kCut, {}, {}};  // a key cut short is not a member
      }
      return Step{Step::kValue, json(std::move(s)), {}};
    }
    if (is_ident_start(c)) {
      size_t start = p_;
      while (p_ < t_.size() && is_ident_char(t_[p_])) ++p_;
      relaxed_ = true;
      return Step{Step::kValue, json(std::string(t_.substr(start, p_ - start))), {}};
    }
    return error("an object key");
  }

  Step object(size_t depth) {
    if (depth >= opt_.max_depth) return error("less nesting");
    ++p_;
    json obj = json::object();
    auto closed = [&] { return Step{Step::kValue, std::move(obj), {}}; };
    while (true) {
      skip_space();
      if (p_ >= t_.size()) return eof_container(closed);
      if (t_[p_] == '}') {
        ++p_;
        return closed();
      }
      Step k = key();
      if (k.kind == Step::kError) return k;
      if (k.kind == Step::kCut) return eof_container(closed);
      skip_space();
      if (p_ >= t_.size()) return eof_container(closed);
      if (t_[p_] != ':') return error("':' after an object key");
      ++p_;
      Step v = value(depth + 1);
      if (v.kind == Step::kError) return v;
      if (v.kind == Step::kCut) return eof_container(closed);
      obj[k.value.get_ref<const std::string&>()] = std::move(v.value);
      if (truncated_) return closed();
      skip_space();
      if (p_ >= t_.size()) return eof_container(closed);
      if (t_[p_] == ',') {
        ++p_;
        skip_space();
        if (p_ < t_.size() && t_[p_] == '}') {
          relaxed_ = true;
          ++p_;
          return closed();
        }
        continue;
      }
      if (t_[p_] == '}') {
        ++p_;
        return closed();
      }
      return error("',' or '}'");
    }
  }

  Step array(size_t depth) {
    if (depth >= opt_.max_depth) return error("less nesting");
    ++p_;
    json arr = json::array();
    auto closed = [&] { return Step{Step::kValue, std::move(arr), {}}; };
    while (true) {
      skip_space();
      if (p_ >= t_.size()) return eof_container(closed);
      if (t_[p_] == ']') {
        ++p_;
        return closed();
      }
      Step v = value(depth + 1);
      if (v.kind == Step::kError) return v;
      if (v.kind == Step::kCut) return eof_container(closed);
      arr.push_back(std::move(v.value));
      if (truncated_) return closed();
      skip_space();
      if (p_ >= t_.size()) return eof_container(closed);
      if (t_[p_] == ',') {
        ++p_;
        skip_space();
        if (p_ < t_.size() && t_[p_] == ']') {
          relaxed_ = true;
          ++p_;
          return closed();
        }
        continue;
      }
      if (t_[p_] == ']') {
        ++p_;
        return closed();
      }
      return error("',' or ']'");
    }
  }

  template <typename Close>
  Step eof_container(Close&& close) {
    if (!opt_.allow_truncated) return error("the end of a container");
    truncated_ = true;
    p_ = t_.size();
    return close();
  }

  std::string_view t_;
  size_t p_;
  RelaxedOptions opt_;
  bool relaxed_ = false;
  bool truncated_ = false;
};

}  // namespace

Result<RelaxedValue> parse_relaxed_value(std::string_view text, size_t pos,
                                         const RelaxedOptions& options) {
  if (pos > text.size()) return Error(fmt::format("offset {}: past the end of the text", pos));
  Reader r(text, pos, options);
  Step s = r.value(0);
  if (s.kind == Step::kError) return Error(std::move(s.error));
  if (s.kind == Step::kCut) {
    return Error(fmt::format("offset {}: input ended before a value", text.size()));
  }
  return RelaxedValue{std::move(s.value), r.pos(), r.relaxed(), r.truncated()};
}

std::optional<nlohmann::json> parse_strict_json(std::string_view text) {
  auto v = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

std::optional<std::string> close_truncated_json(std::string_view t) {
  // Strict JSON scanner. A "safe" point is a prefix that becomes valid once the open
  // containers are closed: right after '{' or '[', or right after a complete value.
  enum class Expect { kValue, kValueOrEnd, kKeyOrEnd, kKey, kColon, kCommaOrEnd, kDone };
  constexpr size_t kMaxDepth = 512;
  std::string stack;  // '{' / '['
  auto closers = [&stack] {
    std::string c;
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) c += (*it == '{') ? '}' : ']';
    return c;
  };
  bool has_safe = false;  // the last safe point: cut there and append the closers
  size_t safe_cut = 0;
  std::string safe_closers;
  auto mark_safe = [&](size_t cut) {
    has_safe = true;
    safe_cut = cut;
    safe_closers = closers();
  };
  auto after_value = [&](size_t cut, Expect& e) {
    e = stack.empty() ? Expect::kDone : Expect::kCommaOrEnd;
    if (!stack.empty()) mark_safe(cut);
  };

  Expect expect = Expect::kValue;
  size_t p = 0;
  while (p < t.size()) {
    char c = t[p];
    if (is_space(c)) {
      ++p;
      continue;
    }
    if (expect == Expect::kDone) return std::nullopt;  // trailing garbage: not a truncation
    if (c == '"') {
      bool is_key = expect == Expect::kKey || expect == Expect::kKeyOrEnd;
      if (!is_key && expect != Expect::kValue && expect != Expect::kValueOrEnd) return std::nullopt;
      size_t q = p + 1;
      size_t last_complete = q;  // end of the last complete character or escape
      bool closed = false;
      while (q < t.size()) {
        char d = t[q];
        if (d == '"') {
          closed = true;
          break;
        }
        if (static_cast<unsigned char>(d) < 0x20) return std::nullopt;
        if (d == '\\') {
          if (q + 1 >= t.size()) break;
          char e = t[q + 1];
          if (e == 'u') {
            long u = read_hex(t, q + 2, 4);
            if (u < 0) {
              if (q + 6 > t.size()) break;  // cut inside the escape
              return std::nullopt;
            }
            if (u >= 0xD800 && u <= 0xDBFF) {  // needs its low half
              if (q + 12 > t.size()) break;
              long lo = read_hex(t, q + 8, 4);
              if (t[q + 6] != '\\' || t[q + 7] != 'u' || lo < 0xDC00 || lo > 0xDFFF) return std::nullopt;
              q += 12;
            } else if (u >= 0xDC00 && u <= 0xDFFF) {
              return std::nullopt;
            } else {
              q += 6;
            }
          } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                     e == 'r' || e == 't') {
            q += 2;
          } else {
            return std::nullopt;
          }
          last_complete = q;
          continue;
        }
        size_t n = utf8_sequence(t, q);
        if (n == 0) {
          // A multi-byte character cut at the end is a truncation; anything else is invalid.
          if (static_cast<unsigned char>(d) >= 0xC2 && t.size() - q < 4) break;
          return std::nullopt;
        }
        q += n;
        last_complete = q;
      }
      if (!closed) {
        if (is_key) break;  // a key cut short is dropped with its member
        std::string out = std::string(t.substr(0, last_complete)) + "\"" + closers();
        if (!parse_strict_json(out)) return std::nullopt;
        return out;
      }
      p = q + 1;
      if (is_key) {
        expect = Expect::kColon;
      } else {
        after_value(p, expect);
      }
      continue;
    }
    if (expect == Expect::kColon) {
      if (c != ':') return std::nullopt;
      expect = Expect::kValue;
      ++p;
      continue;
    }
    if (expect == Expect::kCommaOrEnd) {
      char top = stack.back();
      if (c == ',') {
        expect = top == '{' ? Expect::kKey : Expect::kValue;
        ++p;
        continue;
      }
      if ((top == '{' && c == '}') || (top == '[' && c == ']')) {
        stack.pop_back();
        ++p;
        after_value(p, expect);
        continue;
      }
      return std::nullopt;
    }
    if (expect == Expect::kKeyOrEnd && c == '}') {
      stack.pop_back();
      ++p;
      after_value(p, expect);
      continue;
    }
    if (expect == Expect::kValueOrEnd && c == ']') {
      stack.pop_back();
      ++p;
      after_value(p, expect);
      continue;
    }
    if (expect == Expect::kKey || expect == Expect::kKeyOrEnd) return std::nullopt;
    // A value.
    if (c == '{' || c == '[') {
      if (stack.size() >= kMaxDepth) return std::nullopt;
      stack += c;
      ++p;
      expect = c == '{' ? Expect::kKeyOrEnd : Expect::kValueOrEnd;
      mark_safe(p);
      continue;
    }
    if (c == '-' || is_digit(c)) {
      size_t q = p;
      while (q < t.size() && (is_digit(t[q]) || t[q] == '-' || t[q] == '+' || t[q] == '.' ||
                              t[q] == 'e' || t[q] == 'E')) {
        ++q;
      }
      auto num = parse_strict_json(t.substr(p, q - p));
      if (!num || !num->is_number()) {
        if (q >= t.size()) break;  // a number cut short: back to the last safe point
        return std::nullopt;
      }
      p = q;
      after_value(p, expect);
      continue;
    }
    if (c == 't' || c == 'f' || c == 'n') {
      std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      size_t have = std::min(word.size(), t.size() - p);
      if (t.substr(p, have) != word.substr(0, have)) return std::nullopt;
      if (have < word.size()) break;  // a literal cut short
      p += word.size();
      after_value(p, expect);
      continue;
    }
    return std::nullopt;
  }
  if (expect == Expect::kDone) return std::nullopt;  // complete (or empty): nothing to close
  if (!has_safe) return std::nullopt;
  std::string out = std::string(t.substr(0, safe_cut)) + safe_closers;
  if (!parse_strict_json(out)) return std::nullopt;
  return out;
}

bool is_valid_utf8(std::string_view text) {
  for (size_t p = 0; p < text.size();) {
    size_t n = utf8_sequence(text, p);
    if (n == 0) return false;
    p += n;
  }
  return true;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t p = 0; p < text.size();) {
    size_t n = utf8_sequence(text, p);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++p;
    } else {
      out.append(text.substr(p, n));
      p += n;
    }
  }
  return out;
}

std::string dump_json(const nlohmann::json& value) {
  return util::json_text(value);
}

bool json_depth_within(const nlohmann::json& value, size_t max_depth) {
  std::vector<std::pair<const json*, size_t>> stack{{&value, 0}};
  while (!stack.empty()) {
    auto [v, depth] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    if (depth + 1 > max_depth) return false;
    for (const auto& child : *v) stack.emplace_back(&child, depth + 1);
  }
  return true;
}

}  // namespace kvgate::rescue
