#include "bench/client_text.h"

#include <array>

#include <fmt/format.h>

namespace kvgate::bench {

namespace {

constexpr std::array<std::string_view, 96> kWords = {
    "agent",   "batch",   "branch",  "budget",  "buffer",   "build",   "cache",   "call",    "check",   "commit",
    "config",  "context", "cpu",     "deploy",  "device",   "error",   "file",    "function", "gpu",    "history",
    "info",    "input",   "issue",   "jetson",  "kernel",   "latency", "layer",   "level",   "limit",   "log",
    "memory",  "merge",   "message", "metric",  "model",    "offload", "orin",    "output",  "parse",   "patch",
    "plan",    "prefix",  "queue",   "reads",   "report",   "request", "result",  "retry",   "review",  "server",
    "session", "slot",    "span",    "stream",  "summary",  "system",  "test",    "the",     "thor",    "thread",
    "throughput", "token", "tool",   "trace",   "update",   "user",    "value",   "warn",    "window",  "a",
    "after",   "before",  "because", "every",   "first",    "from",    "into",    "is",      "it",      "not",
    "of",      "on",      "only",    "so",      "that",     "then",    "this",    "to",      "was",     "when",
    "which",   "with",    "fails",   "keeps",   "moves",    "needs"};

// Common characters; random sequences of them tokenize at about one token per character.
constexpr std::string_view kHanzi =
    "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天"
    "而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些"
    "与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相"
    "次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立"
    "马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共";

constexpr std::array<std::string_view, 4> kHanziPunct = {"，", "。", "；", "："};
constexpr std::array<std::string_view, 4> kLevels = {"D", "I", "W", "E"};

std::string_view word(Rng& rng) { return kWords[rng.below(kWords.size())]; }

std::string_view hanzi(Rng& rng) {
  const size_t n = kHanzi.size() / 3;  // every character is three bytes in UTF-8
  return kHanzi.substr(rng.below(n) * 3, 3);
}

std::string sentence(Rng& rng) {
  std::string s(word(rng));
  s[0] = static_cast<char>(s[0] - 'a' + 'A');
  const uint64_t n = rng.between(3, 15);
  for (uint64_t i = 0; i < n; ++i) {
    s += rng.chance(0.08) ? ", " : " ";
    s += word(rng);
  }
  return s + ".";
}

std::string chinese_sentence(Rng& rng) {
  std::string s;
  const uint64_t n = rng.between(6, 28);
  for (uint64_t i = 0; i < n; ++i) {
    s += hanzi(rng);
    if (i + 1 < n && rng.chance(0.07)) s += kHanziPunct[rng.below(3)];
  }
  return s + "。";
}

std::string identifier(Rng& rng) { return fmt::format("{}_{}", word(rng), word(rng)); }

std::string code_line(Rng& rng) {
  const std::string indent(4 * rng.below(3), ' ');
  switch (rng.below(6)) {
    case 0:
      return fmt::format("{}auto {} = {}({});", indent, identifier(rng), word(rng), rng.below(1000));
    case 1:
      return fmt::format("{}if ({}.{}() > {}) {{", indent, word(rng), word(rng), rng.below(5000));
    case 2:
      return fmt::format("{}return {}_{};", indent, word(rng), rng.below(100));
    case 3:
      return fmt::format("{}// {}", indent, sentence(rng));
    case 4:
      return indent + "}";
    default:
      return fmt::format("{}{}.{}({}, {});", indent, word(rng), word(rng), identifier(rng), rng.below(64));
  }
}

std::string clock_of_day(int64_t ms) {
  const int64_t day_ms = ((ms % 86'400'000) + 86'400'000) % 86'400'000;
  return fmt::format("{:02}:{:02}:{:02}.{:03}", day_ms / 3'600'000, day_ms / 60'000 % 60, day_ms / 1000 % 60,
                     day_ms % 1000);
}

std::string log_line(Rng& rng, int64_t& clock_ms, bool ids) {
  clock_ms += static_cast<int64_t>(rng.below(4000));
  std::string line = fmt::format("{} {} {}: {}", clock_of_day(clock_ms), kLevels[rng.below(kLevels.size())],
                                 word(rng), sentence(rng));
  if (ids && rng.chance(0.3)) {
    const auto format = static_cast<IdFormat>(rng.below(kIdFormats));
    line += fmt::format(" id={}", make_id(rng, format, clock_ms));
  }
  return line;
}

// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
void civil_from_days(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = static_cast<int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0);
}

std::string hex(Rng& rng, size_t digits) {
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < digits; ++i) s += kHex[rng.below(16)];
  return s;
}

}  // namespace

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rng::below(uint64_t n) {
  // The remainder's bias is below n / 2^64: nothing for the sizes drawn here.
  return next() % n;
}

double Rng::unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  Rng r(seed ^ (stream * 0xd1b54a32d192ed03ULL));
  r.next();
  return r.next();
}

const char* text_kind_name(TextKind kind) {
  switch (kind) {
    case TextKind::kProse:
      return "prose";
    case TextKind::kCode:
      return "code";
    case TextKind::kLog:
      return "log";
    case TextKind::kChinese:
      return "chinese";
  }
  return "prose";
}

// Measured with the pinned engine's /tokenize on the Qwen2 vocabulary (kvgate synth's models),
// 150–260 KB of each kind (make_text, seed 7): prose 5.08, code 3.47, log 3.07, Chinese 3.08
// bytes per token (1.03 characters).
double bytes_per_token(TextKind kind) {
  switch (kind) {
    case TextKind::kProse:
      return 5.1;
    case TextKind::kCode:
      return 3.5;
    case TextKind::kLog:
      return 3.1;
    case TextKind::kChinese:
      return 3.1;
  }
  return 4.0;
}

std::string make_text(Rng& rng, TextKind kind, uint64_t tokens, int64_t clock_ms, bool ids) {
  const auto target = static_cast<size_t>(static_cast<double>(tokens) * bytes_per_token(kind));
  std::string out;
  while (out.empty() || out.size() < target) {
    switch (kind) {
      case TextKind::kProse:
        out += out.empty() ? "" : rng.chance(0.15) ? "\n\n" : " ";
        out += sentence(rng);
        break;
      case TextKind::kChinese:
        out += out.empty() || !rng.chance(0.1) ? "" : "\n\n";
        out += chinese_sentence(rng);
        break;
      case TextKind::kCode:
        out += out.empty() ? "" : "\n";
        out += code_line(rng);
        break;
      case TextKind::kLog:
        out += out.empty() ? "" : "\n";
        out += log_line(rng, clock_ms, ids);
        break;
    }
  }
  return out;
}

uint64_t estimated_tokens(std::string_view text) { return (text.size() + 3) / 4; }

std::string iso_time(int64_t epoch_ms) {
  const int64_t days = (epoch_ms >= 0 ? epoch_ms : epoch_ms - 86'399'999) / 86'400'000;
  int64_t y = 0;
  unsigned m = 0, d = 0;
  civil_from_days(days, y, m, d);
  return fmt::format("{:04}-{:02}-{:02}T{}Z", y, m, d, clock_of_day(epoch_ms));
}

std::string make_id(Rng& rng, IdFormat format, int64_t clock_ms) {
  static constexpr std::string_view kBase62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  switch (format) {
    case IdFormat::kUuid: {
      const std::string h = hex(rng, 32);
      static constexpr std::string_view kVariant = "89ab";
      return fmt::format("{}-{}-4{}-{}{}-{}", h.substr(0, 8), h.substr(8, 4), h.substr(13, 3),
                         kVariant[rng.below(4)], h.substr(17, 3), h.substr(20, 12));
    }
    case IdFormat::kIsoTime:
      return iso_time(clock_ms);
    case IdFormat::kEpochMs:
      return std::to_string(clock_ms);
    case IdFormat::kRequestId: {
      std::string s = "req_";
      for (int i = 0; i < 24; ++i) s += kBase62[rng.below(kBase62.size())];
      return s;
    }
    case IdFormat::kTraceparent:
      return fmt::format("00-{}-{}-01", hex(rng, 32), hex(rng, 16));
  }
  return {};
}

}  // namespace kvgate::bench
