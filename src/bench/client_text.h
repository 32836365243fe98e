// Material for simulated agent clients (client_sim.h): a seeded random source, flavoured text
// of a requested size in tokens, and the ids and clock values agents put into their messages.
//
// Text kinds follow the shared agent traces (tests/fixtures/traces/): English prose over an agent's
// working vocabulary, code-like lines (C-family statements, comments, indentation), log-like
// lines (clock time, level, component, a sentence) and Chinese prose. Each kind has its own
// density: make_text() writes about `tokens` tokens by writing tokens × bytes_per_token(kind)
// bytes, with the densities measured on the pinned engine's Qwen2 tokenizer (the figures are
// in client_text.cc). A client that estimates tokens itself uses estimated_tokens(): bytes / 4,
// the rule of thumb agents apply whatever the text.
//
// Ids come in the formats agents and services really emit: UUID v4, an ISO-8601 UTC time with
// milliseconds, epoch milliseconds, an API request id ("req_" + 24 base62 characters) and a
// W3C traceparent. Clock values come from the caller's simulated clock (epoch milliseconds),
// never from the machine's.
//
// Determinism: everything is a function of the Rng's seed and the calls made on it
// (splitmix64, no standard-library distributions, whose results differ between libraries).
//
// Thread-safety: an Rng belongs to one thread; the functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::bench {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform in [0, n); REQUIRES: n > 0.
  uint64_t below(uint64_t n);
  // Uniform in [lo, hi]; REQUIRES: lo <= hi.
  uint64_t between(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }
  double unit();  // [0, 1)
  bool chance(double p) { return unit() < p; }

 private:
  uint64_t state_;
};

// A seed for a derived stream (a client of a run, a part of a client), stable across builds.
uint64_t mix_seed(uint64_t seed, uint64_t stream);

enum class TextKind { kProse, kCode, kLog, kChinese };
const char* text_kind_name(TextKind kind);
// Bytes per token of the kind's text with the Qwen2 tokenizer (measured; see client_text.cc).
double bytes_per_token(TextKind kind);
// About `tokens` tokens of the kind (at least one line or sentence). Log lines carry clock
// times drawn around `clock_ms`; with `ids` some lines carry request ids and UUIDs too.
std::string make_text(Rng& rng, TextKind kind, uint64_t tokens, int64_t clock_ms = 0, bool ids = false);
// The client's own estimate of a text's tokens: bytes / 4, rounded up.
uint64_t estimated_tokens(std::string_view text);

enum class IdFormat { kUuid, kIsoTime, kEpochMs, kRequestId, kTraceparent };
constexpr int kIdFormats = 5;
std::string make_id(Rng& rng, IdFormat format, int64_t clock_ms);
// "2026-11-29T10:00:46.123Z" for epoch milliseconds (proleptic Gregorian, UTC).
std::string iso_time(int64_t epoch_ms);

}  // namespace kvgate::bench
