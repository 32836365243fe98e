#include "rescue/relaxed_json.h"

#include <charconv>
#include <cstdint>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "rescue/utf8.h"
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
