#include "bench/client_run.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace kvgate::bench {

using nlohmann::json;

namespace {

std::vector<std::vector<const ClientTurnResult*>> by_client(const ClientRun& run) {
  std::vector<std::vector<const ClientTurnResult*>> out(run.clients);
  for (const auto& t : run.turns) {
    if (t.client >= out.size()) out.resize(t.client + 1);
    out[t.client].push_back(&t);
  }
  return out;
}

// Mean increment over the turns that extend a conversation (not its first request).
double mean_growth(const std::vector<const ClientTurnResult*>& turns) {
  double sum = 0;
  size_t n = 0;
  for (const auto* t : turns) {
    if (t->new_conversation) continue;
    sum += static_cast<double>(t->increment_tokens);
    ++n;
  }
  return n == 0 ? 0 : sum / static_cast<double>(n);
}

std::string where(const ClientTurnResult& t) { return fmt::format("client {} turn {}", t.client, t.turn); }

std::string what_client_did(const ClientTurnResult& t) {
  std::string s = t.kind;
  for (const auto& n : t.notes) s += "; " + n;
  return s;
}

void append_compactions(const ClientTurnResult& t, std::string& out) {
  for (const auto& ev : t.compactions) {
    out += fmt::format("{}{} {} {} {}->{}", out.empty() ? "" : ", ", where(t), ev.value("level", ""),
                       ev.value("trigger", ""), ev.value("tokens_before", 0), ev.value("tokens_after", 0));
  }
}

std::string compaction_list(const ClientRun& run) {
  std::string out;
  for (const auto& t : run.turns) append_compactions(t, out);
  return out;
}

// The answered turns that prefilled most, for a ratio violation.
std::string costliest_turns(const ClientRun& run, size_t n) {
  std::vector<const ClientTurnResult*> ok;
  for (const auto& t : run.turns) {
    if (t.ok()) ok.push_back(&t);
  }
  std::stable_sort(ok.begin(), ok.end(),
                   [](const auto* a, const auto* b) { return a->prefilled_tokens > b->prefilled_tokens; });
  std::string out;
  for (size_t i = 0; i < std::min(n, ok.size()); ++i) {
    const auto& t = *ok[i];
    out += fmt::format("{}{}: prefilled {} of {}, the engine computed {:.0f} ({}{})", out.empty() ? "" : "; ", where(t),
                       t.prefilled_tokens, t.prompt_tokens, t.engine_processed, what_client_did(t),
                       t.compactions.empty() ? "" : "; compacted");
  }
  return out;
}

void check_sessions(const ClientRun& run, std::vector<Violation>& out) {
  std::map<std::string, std::set<size_t>> clients_of;
  for (const auto& turns : by_client(run)) {
    std::string last;
    for (const auto* t : turns) {
      if (t->session.empty()) continue;
      clients_of[t->session].insert(t->client);
      if (!last.empty() && t->session != last && (!t->new_conversation || t->carries_reply)) {
        out.push_back({"split", where(*t),
                       fmt::format("served by session {} after {}, but the client {} ({})", t->session, last,
                                   t->new_conversation ? "went on from the summary its session wrote"
                                                       : "did not start a new conversation",
                                   what_client_did(*t))});
      }
      last = t->session;
    }
  }
  for (const auto& [session, clients] : clients_of) {
    if (clients.size() < 2) continue;
    std::string list;
    for (size_t c : clients) list += fmt::format("{}{}", list.empty() ? "" : ", ", c);
    out.push_back({"merge", "run", fmt::format("session {} served the conversations of clients {}", session, list)});
  }
}

// Until its conversation needed a compaction, a turn's prompt is the client's request: kvgate
// may pin volatile values or repair a message, not leave messages out (seen: an edit of a
// middle message taken for a window, 1,730 tokens sent of the client's 3,912).
void check_sent_whole(const ClientRun& run, std::vector<Violation>& out) {
  if (run.path != "gateway") return;
  for (const auto& turns : by_client(run)) {
    bool compacted = false;
    for (const auto* t : turns) {
      if (t->new_conversation) compacted = false;
      for (const auto& ev : t->compactions) {
        if (ev.value("trigger", "") != "window" || !run.engine_shifts) compacted = true;
      }
      if (compacted || !t->ok() || t->prompt_tokens * 10 >= t->client_tokens * 9) continue;
      std::string list;
      append_compactions(*t, list);
      out.push_back(
          {"sent_whole", where(*t),
           fmt::format("prompt {} tokens of the client's {}, before any compaction its conversation "
                       "needed: messages the request carries were not sent (compactions: {}) [client: {}]",
                       t->prompt_tokens, t->client_tokens, list.empty() ? "none" : list,
                       what_client_did(*t))});
    }
  }
}

}  // namespace

double steady_ratio_bound(double g, double high, double low) {
  if (high <= low || g <= 0) return 0;
  return 2 * high * g / ((high - low) * (high + low));
}

uint64_t compaction_bound(size_t turns, double g, double high, double low) {
  if (high <= low) return turns;
  return static_cast<uint64_t>(std::ceil(static_cast<double>(turns) * g / (high - low))) + 1;
}

double IdealRun::ratio() const {
  return prompt_tokens == 0 ? 0 : static_cast<double>(prefilled_tokens) / static_cast<double>(prompt_tokens);
}

IdealRun ideal_run(const std::vector<const ClientTurnResult*>& turns, const Watermarks& m) {
  IdealRun r;
  // The gateway compacts when prompt + r > H, down to L − r.
  const uint64_t trigger = m.high > m.reserve ? m.high - m.reserve : 0;
  const uint64_t target = m.low > m.reserve ? m.low - m.reserve : m.low;
  uint64_t prompt = 0;
  for (const auto* t : turns) {
    uint64_t cost = 0;
    if (t->new_conversation) {
      prompt = t->client_tokens;
      cost = prompt;
    } else {
      prompt += t->increment_tokens;
      // No more than the request carries: without a conversation id nothing else may enter
      // the prompt, so a client's window caps it (the dropped front costs nothing: shifted).
      if (t->client_tokens > 0) prompt = std::min(prompt, t->client_tokens);
      cost = t->increment_tokens;
      if (t->rewrite_tokens > 0) cost = std::max(cost, std::min(prompt, t->rewrite_tokens));
    }
    if (m.high > 0 && prompt > trigger) {
      prompt = target;
      cost = target;
      ++r.compactions;
    }
    r.prompt_tokens += prompt;
    r.prefilled_tokens += std::min(cost, prompt);
  }
  return r;
}

RunFigures summarize_run(const ClientRun& run) {
  RunFigures f;
  std::set<std::string> sessions;
  for (const auto& t : run.turns) {
    ++f.turns;
    f.compactions += t.compactions.size();
    for (const auto& ev : t.compactions) {
      if (ev.contains("summary_error") && !ev["summary_error"].get<std::string>().empty()) ++f.summary_failures;
    }
    f.engine_processed += t.engine_processed;
    f.engine_cached += t.engine_cached;
    f.engine_cached_known = f.engine_cached_known && t.engine_cached_known;
    if (t.new_conversation) ++f.conversations_started;
    if (!t.session.empty()) sessions.insert(t.session);
    if (!t.ok()) {
      ++f.failures[failure_name(t.failure)];
      continue;
    }
    ++f.ok;
    f.prompt_tokens += t.prompt_tokens;
    f.cached_tokens += t.cached_tokens;
    f.prefilled_tokens += t.prefilled_tokens;
  }
  f.sessions = sessions.size();
  f.prefilled_ratio = f.prompt_tokens == 0 ? 0
                                           : static_cast<double>(f.prefilled_tokens) / static_cast<double>(f.prompt_tokens);
  const double engine_all = f.engine_processed + f.engine_cached;
  f.engine_processed_ratio = engine_all <= 0 ? 0 : f.engine_processed / engine_all;
  const auto H = static_cast<double>(run.marks.high), L = static_cast<double>(run.marks.low);
  std::vector<const ClientTurnResult*> extending;
  for (const auto& turns : by_client(run)) {
    if (turns.empty()) continue;
    f.compaction_bound += compaction_bound(turns.size(), mean_growth(turns), H, L);
    const IdealRun ideal = ideal_run(turns, run.marks);
    f.ideal.prompt_tokens += ideal.prompt_tokens;
    f.ideal.prefilled_tokens += ideal.prefilled_tokens;
    f.ideal.compactions += ideal.compactions;
    extending.insert(extending.end(), turns.begin(), turns.end());
  }
  f.growth = mean_growth(extending);
  f.steady_ratio_bound = steady_ratio_bound(f.growth, H, L);
  f.ratio_bound = f.ideal.ratio();
  return f;
}

std::vector<Violation> check_properties(const ClientRun& run) {
  std::vector<Violation> out;
  const RunFigures& f = run.figures;
  for (const auto& t : run.turns) {
    if (t.ok()) continue;
    out.push_back({"failed_turn", where(t),
                   fmt::format("{} (HTTP {}): {} [client: {}]", failure_name(t.failure), t.status,
                               t.error.substr(0, 400), what_client_did(t))});
  }
  if (f.compactions > f.compaction_bound) {
    out.push_back({"compactions", "run",
                   fmt::format("{} compactions > bound {} (Σ over {} client(s) of ⌈turns·g/(H−L)⌉+1; g={:.0f}, "
                               "H={}, L={}): {}",
                               f.compactions, f.compaction_bound, run.clients, f.growth, run.marks.high,
                               run.marks.low, compaction_list(run))});
  }
  // What the engine computed, by its own counters when it keeps them (summary requests
  // included): its answers' cached_tokens leave out the chunks --cache-reuse shifts into
  // place, so on such an engine prefilled ÷ prompt from the answers overstates the work
  // (seen: a turn reported 6,190 of 6,190 prefilled while the engine computed 729).
  const bool by_engine = f.engine_cached_known && f.engine_processed + f.engine_cached > 0;
  const double measured = by_engine ? f.engine_processed_ratio : f.prefilled_ratio;
  if (f.ok > 0 && f.ratio_bound > 0 && measured > 1.5 * f.ratio_bound) {
    out.push_back({"prefilled_ratio", "run",
                   fmt::format("{} = {:.3f} (the answers: prefilled ÷ prompt {:.3f}, {} of {} over {} answered turns; "
                               "the engine's counters: {:.0f} computed, {:.0f} reused) > 1.5 × bound {:.3f} (ideal "
                               "gateway on this run: {} of {}, {} compactions; steady formula {:.3f}); costliest "
                               "turns: {}",
                               by_engine ? "computed ÷ (computed + reused) by the engine's counters" : "prefilled ÷ prompt",
                               measured, f.prefilled_ratio, f.prefilled_tokens, f.prompt_tokens, f.ok,
                               f.engine_processed, f.engine_cached, f.ratio_bound, f.ideal.prefilled_tokens,
                               f.ideal.prompt_tokens, f.ideal.compactions, f.steady_ratio_bound,
                               costliest_turns(run, 3))});
  }
  check_sent_whole(run, out);
  check_sessions(run, out);
  return out;
}

std::string violations_text(const ClientRun& run) {
  std::string out;
  for (const auto& v : run.violations) {
    out += fmt::format("{} seed {} [{}]: {} at {}: {}\n", run.behaviour, run.seed, run.path, v.property, v.where,
                       v.detail);
  }
  return out;
}

}  // namespace kvgate::bench
