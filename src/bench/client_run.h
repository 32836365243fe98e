// The figures of one run of simulated clients (client_sim.h) through kvgate or straight to
// the engine, the bounds an ideal gateway would meet on that run, and the properties kvgate
// must hold over it. Pure: clients.h fills the records, this unit judges them.
//
// The arithmetic. The gateway compacts when the next prompt plus the room kept for the
// reply (r) would pass its high watermark H, down to its low watermark L in one step. A
// turn grows the prompt by g tokens: the client's new material (user text, tool results)
// and the previous reply, which the next prompt carries. Between two compactions the prompt
// goes from L to H, so a cycle has n = (H − L) / g turns, and over it
//   prompt tokens   Σ_{k=0}^{n−1} (L + k·g) = n·L + g·n(n − 1)/2 ≈ n·(H + L)/2
//   prefilled       L once (the compacted prompt, assuming none of it is reused) and g on
//                   each of the other n − 1 turns: L + (n − 1)·g ≈ H
//   ratio           H / (n·(H + L)/2) = 2·H·g / ((H − L)·(H + L))          (steady_ratio_bound)
// With H = 12,288 (the safe cap of a 16K slot), L = 0.55·H = 6,758, g = 500: 0.117.
// One compaction per n turns: over T turns at most ⌈T·g / (H − L)⌉, plus one for a first
// request that is already above H (a pasted history)                     (compaction_bound).
// The reply: g includes its tokens because the next prompt carries them; the bound counts
// them as prefilled, though the engine usually still holds the generated tokens in its
// cache, so there the bound is conservative. Summary requests the gateway sends to the
// engine are not turns: they show in the engine's counters, not in the answers' figures.
//
// Where the steady formula does not apply, the client changed its own history and the cost
// is the client's, whatever the gateway does (it must send what the request carries):
//   self-summary every N turns, restarting at S tokens (system prompt, summary, new turn):
//     per cycle prefilled ≤ S + (N − 1)·g over prompts N·S + g·N(N − 1)/2, so the ratio is
//     (S + (N − 1)·g) / (N·S + g·N(N − 1)/2) while S + N·g stays under H;
//   an edit of message i: that turn prefills at most the tokens from message i to the end
//     (D) instead of g.
// ideal_run() applies these rules to the measured turns of a run — the first request as
// measured (above H: one compaction to L), then per turn g_t, an edit's D_t or a restart's
// S_t, and a compaction whenever the prompt plus r passes H — and its ratio is the run's
// bound (ratio_bound), warm-up included. The ideal gateway sends no more than the request
// carries (the clients name no conversation, and then nothing the request does not carry may
// enter the prompt), so a client's window caps its prompt; messages dropped at the front,
// reordered tool results and volatile ids cost it nothing (the engine shifts the cache).
//
// Properties (check_properties, gateway path): no failed turn; compactions ≤ the bound;
// prefilled ÷ prompt (the answers' usage) ≤ 1.5 × ratio_bound; until a compaction the
// conversation needed (at the high watermark, or on an overflow; on an engine that does not
// shift, also one that follows a client's window), a prompt holds ≥ 90 % of the tokens of the
// client's request (sent_whole: what the request carries is sent); a client's turns stay in
// one session until the client itself starts a new conversation (no split; a self-summary's
// continuation that carries its summary's lines is no new conversation), and two clients
// never share one (no merge). Each violation names the behaviour, seed, client, turn and
// figures.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/failure.h"

namespace kvgate::bench {

struct ClientTurnResult {
  size_t client = 0;   // index among the run's parallel clients
  size_t turn = 0;     // the client's turn, 1-based
  size_t request = 0;  // order of sending in the run, 1-based
  std::string kind;    // ClientTurn::kind
  bool new_conversation = false;
  bool carries_reply = false;      // ClientTurn::carries_reply
  std::vector<std::string> notes;  // what the client did (ClientTurn::notes)
  bool asks_tool_call = false;
  size_t tool_calls = 0;  // calls in the reply
  int status = 0;
  FailureKind failure = FailureKind::kNone;
  std::string error;
  size_t request_messages = 0;
  size_t request_bytes = 0;
  double total_ms = 0;
  uint64_t prompt_tokens = 0, cached_tokens = 0, prefilled_tokens = 0, completion_tokens = 0;
  double engine_processed = 0, engine_cached = 0;  // the engine's counters over the turn
  bool engine_cached_known = true;
  // The client's request counted with the engine's template and tokenizer: all of it, its
  // increment (previous reply and new material; 0 on a new conversation), and from the first
  // message the client rewrote to the end (0: none).
  uint64_t client_tokens = 0, increment_tokens = 0, rewrite_tokens = 0;
  nlohmann::json compactions = nlohmann::json::array();  // the gateway's events of this turn
  std::string session;                                   // the session that served it ("": unknown)
  bool ok() const { return failure == FailureKind::kNone; }
};

struct Watermarks {
  uint64_t high = 0;   // H
  uint64_t low = 0;    // L
  uint64_t reserve = 0;  // r: room for the reply (the request's max_tokens)
};

double steady_ratio_bound(double g, double high, double low);
uint64_t compaction_bound(size_t turns, double g, double high, double low);

struct IdealRun {
  uint64_t prompt_tokens = 0, prefilled_tokens = 0;
  size_t compactions = 0;
  double ratio() const;
};
// The ideal gateway over one client's turns (in order).
IdealRun ideal_run(const std::vector<const ClientTurnResult*>& turns, const Watermarks& marks);

struct RunFigures {
  size_t turns = 0, ok = 0;
  std::map<std::string, size_t> failures;  // by failure_name
  size_t compactions = 0;
  size_t summary_failures = 0;  // compactions whose model summary failed (summary_error)
  uint64_t prompt_tokens = 0, cached_tokens = 0, prefilled_tokens = 0;  // answered turns
  double prefilled_ratio = 0;
  double engine_processed = 0, engine_cached = 0;
  double engine_processed_ratio = 0;  // processed / (processed + cached)
  bool engine_cached_known = true;
  size_t conversations_started = 0;  // by the clients
  size_t sessions = 0;               // distinct sessions that served the turns
  double growth = 0;                 // g: mean increment of the turns that extend a conversation
  uint64_t compaction_bound = 0;     // Σ over clients of ⌈turns·g/(H − L)⌉ + 1
  double steady_ratio_bound = 0;     // 2·H·g / ((H − L)(H + L))
  double ratio_bound = 0;            // ideal_run over the run
  IdealRun ideal;
};

struct Violation {
  std::string property;  // failed_turn, compactions, prefilled_ratio, sent_whole, split, merge
  std::string where;     // "client 1 turn 7", or "run"
  std::string detail;
};

struct ClientRun {
  std::string behaviour;
  uint64_t seed = 0;
  std::string path;  // "gateway" or "direct"
  size_t clients = 1;
  Watermarks marks;
  // The engine moves cached chunks into place after a deletion: the gateway has no reason to
  // drop more than a client's window dropped (check_properties: sent_whole).
  bool engine_shifts = false;
  std::vector<ClientTurnResult> turns;  // in the order sent
  RunFigures figures;
  std::vector<Violation> violations;
  double wall_s = 0;
};

RunFigures summarize_run(const ClientRun& run);
// REQUIRES: run.figures = summarize_run(run).
std::vector<Violation> check_properties(const ClientRun& run);
// "behaviour seed S: property at where: detail", one line per violation.
std::string violations_text(const ClientRun& run);

}  // namespace kvgate::bench
