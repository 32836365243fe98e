#include "rescue/truncated_json.h"

#include <algorithm>
#include <cstdint>

#include "rescue/relaxed_json.h"
#include "rescue/utf8.h"

namespace kvgate::rescue {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A strict JSON scanner that remembers the last "safe" point: a prefix that becomes valid once
// the open containers are closed (right after '{' or '[', or right after a complete value).
class TruncatedJson {
 public:
  explicit TruncatedJson(std::string_view t) : t_(t) {}

  std::optional<std::string> close();

 private:
  enum class Expect { kValue, kValueOrEnd, kKeyOrEnd, kKey, kColon, kCommaOrEnd, kDone };
  // What a step found: go on; the text is not JSON cut short; it was cut inside a token (back
  // to the last safe point); or a string cut short closed the text (closed_).
  enum class Step { kNext, kInvalid, kCut, kClosed };
  static constexpr size_t kMaxDepth = 512;

  std::string closers() const;
  void mark_safe(size_t cut);
  void after_value();
  void close_container();
  Step escape(size_t& q) const;
  Step string();
  std::optional<Step> punctuation(char c);
  Step value(char c);
  Step number();
  Step literal(char c);

  std::string_view t_;
  size_t p_ = 0;
  Expect expect_ = Expect::kValue;
  std::string stack_;  // '{' / '['
  bool has_safe_ = false;
  size_t safe_cut_ = 0;
  std::string safe_closers_;
  std::string closed_;
};

std::string TruncatedJson::closers() const {
  std::string c;
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) c += (*it == '{') ? '}' : ']';
  return c;
}

void TruncatedJson::mark_safe(size_t cut) {
  has_safe_ = true;
  safe_cut_ = cut;
  safe_closers_ = closers();
}

void TruncatedJson::after_value() {
  expect_ = stack_.empty() ? Expect::kDone : Expect::kCommaOrEnd;
  if (!stack_.empty()) mark_safe(p_);
}

void TruncatedJson::close_container() {
  stack_.pop_back();
  ++p_;
  after_value();
}

// At a backslash at `q`: moves `q` past the escape.
TruncatedJson::Step TruncatedJson::escape(size_t& q) const {
  if (q + 1 >= t_.size()) return Step::kCut;
  const char e = t_[q + 1];
  if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
    q += 2;
    return Step::kNext;
  }
  if (e != 'u') return Step::kInvalid;
  const long u = read_hex(t_, q + 2, 4);
  if (u < 0) return q + 6 > t_.size() ? Step::kCut : Step::kInvalid;  // cut inside the escape
  if (u >= 0xDC00 && u <= 0xDFFF) return Step::kInvalid;
  if (u < 0xD800 || u > 0xDBFF) {
    q += 6;
    return Step::kNext;
  }
  // A high surrogate needs its low half.
  if (q + 12 > t_.size()) return Step::kCut;
  const long lo = read_hex(t_, q + 8, 4);
  if (t_[q + 6] != '\\' || t_[q + 7] != 'u' || lo < 0xDC00 || lo > 0xDFFF) return Step::kInvalid;
  q += 12;
  return Step::kNext;
}

// At '"': a key or a string value. A value cut short is closed where its last complete
// character or escape ends; a key cut short is dropped with its member.
TruncatedJson::Step TruncatedJson::string() {
  const bool is_key = expect_ == Expect::kKey || expect_ == Expect::kKeyOrEnd;
  if (!is_key && expect_ != Expect::kValue && expect_ != Expect::kValueOrEnd) return Step::kInvalid;
  size_t q = p_ + 1;
  size_t last_complete = q;
  bool ended = false;
  while (q < t_.size()) {
    const char d = t_[q];
    if (d == '"') {
      ended = true;
      break;
    }
    if (static_cast<unsigned char>(d) < 0x20) return Step::kInvalid;
    if (d == '\\') {
      const Step step = escape(q);
      if (step == Step::kInvalid) return step;
      if (step == Step::kCut) break;
      last_complete = q;
      continue;
    }
    const size_t n = utf8_sequence(t_, q);
    if (n == 0) {
      // A multi-byte character cut at the end is a truncation; anything else is invalid.
      if (static_cast<unsigned char>(d) >= 0xC2 && t_.size() - q < 4) break;
      return Step::kInvalid;
    }
    q += n;
    last_complete = q;
  }
  if (!ended) {
    if (is_key) return Step::kCut;
    closed_ = std::string(t_.substr(0, last_complete)) + "\"" + closers();
    return Step::kClosed;
  }
  p_ = q + 1;
  if (is_key) {
    expect_ = Expect::kColon;
  } else {
    after_value();
  }
  return Step::kNext;
}

// Between values: ':' after a key, ',' or the end after a value, the end of an empty
// container. nullopt when `c` must start a value.
std::optional<TruncatedJson::Step> TruncatedJson::punctuation(char c) {
  if (expect_ == Expect::kColon) {
    if (c != ':') return Step::kInvalid;
    expect_ = Expect::kValue;
    ++p_;
    return Step::kNext;
  }
  if (expect_ == Expect::kCommaOrEnd) {
    const char top = stack_.back();
    if (c == ',') {
      expect_ = top == '{' ? Expect::kKey : Expect::kValue;
      ++p_;
      return Step::kNext;
    }
    if ((top == '{' && c == '}') || (top == '[' && c == ']')) {
      close_container();
      return Step::kNext;
    }
    return Step::kInvalid;
  }
  if ((expect_ == Expect::kKeyOrEnd && c == '}') || (expect_ == Expect::kValueOrEnd && c == ']')) {
    close_container();
    return Step::kNext;
  }
  if (expect_ == Expect::kKey || expect_ == Expect::kKeyOrEnd) return Step::kInvalid;
  return std::nullopt;
}

TruncatedJson::Step TruncatedJson::value(char c) {
  if (c == '{' || c == '[') {
    if (stack_.size() >= kMaxDepth) return Step::kInvalid;
    stack_ += c;
    ++p_;
    expect_ = c == '{' ? Expect::kKeyOrEnd : Expect::kValueOrEnd;
    mark_safe(p_);
    return Step::kNext;
  }
  if (c == '-' || is_digit(c)) return number();
  if (c == 't' || c == 'f' || c == 'n') return literal(c);
  return Step::kInvalid;
}

// A number cut short goes back to the last safe point.
TruncatedJson::Step TruncatedJson::number() {
  size_t q = p_;
  while (q < t_.size() &&
         (is_digit(t_[q]) || t_[q] == '-' || t_[q] == '+' || t_[q] == '.' || t_[q] == 'e' || t_[q] == 'E')) {
    ++q;
  }
  auto num = parse_strict_json(t_.substr(p_, q - p_));
  if (!num || !num->is_number()) return q >= t_.size() ? Step::kCut : Step::kInvalid;
  p_ = q;
  after_value();
  return Step::kNext;
}

// true, false or null; one cut short goes back to the last safe point.
TruncatedJson::Step TruncatedJson::literal(char c) {
  const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
  const size_t have = std::min(word.size(), t_.size() - p_);
  if (t_.substr(p_, have) != word.substr(0, have)) return Step::kInvalid;
  if (have < word.size()) return Step::kCut;
  p_ += word.size();
  after_value();
  return Step::kNext;
}

std::optional<std::string> TruncatedJson::close() {
  while (p_ < t_.size()) {
    const char c = t_[p_];
    if (is_space(c)) {
      ++p_;
      continue;
    }
    if (expect_ == Expect::kDone) return std::nullopt;  // trailing garbage: not a truncation
    Step step = Step::kNext;
    if (c == '"') {
      step = string();
    } else if (auto s = punctuation(c)) {
      step = *s;
    } else {
      step = value(c);
    }
    if (step == Step::kInvalid) return std::nullopt;
    if (step == Step::kClosed) return parse_strict_json(closed_) ? std::optional<std::string>(closed_) : std::nullopt;
    if (step == Step::kCut) break;
  }
  if (expect_ == Expect::kDone) return std::nullopt;  // complete (or empty): nothing to close
  if (!has_safe_) return std::nullopt;
  std::string out = std::string(t_.substr(0, safe_cut_)) + safe_closers_;
  if (!parse_strict_json(out)) return std::nullopt;
  return out;
}

}  // namespace

std::optional<std::string> close_truncated_json(std::string_view text) { return TruncatedJson(text).close(); }

}  // namespace kvgate::rescue
