#include "session/compactor.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "util/strings.h"

namespace kvgate::session {

using nlohmann::json;
using util::utf8_ceil;
using util::utf8_floor;

std::string message_text(const json& message) {
  std::string out;
  auto c = message.find("content");
  if (c == message.end()) return out;
  if (c->is_string()) return c->get<std::string>();
  if (c->is_array()) {
    for (const auto& part : *c) {
      if (part.is_object() && part.contains("text") && part["text"].is_string()) out += part["text"].get<std::string>();
    }
  }
  return out;
}

namespace {

std::string clip(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  return s.substr(0, utf8_floor(s, n)) + "…";
}

std::string one_line(std::string s) {
  for (char& ch : s) {
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  }
  return s;
}

// Sentence boundaries: ". ", "! ", "? ", newlines, and the CJK full stops.
std::vector<std::string> sentences(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    cur += text[i];
    bool end = text[i] == '\n' || ((text[i] == '.' || text[i] == '!' || text[i] == '?') &&
                                   (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\n'));
    for (std::string_view stop : {"。", "！", "？"}) {
      if (cur.size() >= stop.size() && cur.compare(cur.size() - stop.size(), stop.size(), stop) == 0) end = true;
    }
    if (end) {
      std::string t = one_line(cur);
      if (t.find_first_not_of(' ') != std::string::npos) out.push_back(t.substr(t.find_first_not_of(' ')));
      cur.clear();
    }
  }
  std::string t = one_line(cur);
  if (t.find_first_not_of(' ') != std::string::npos) out.push_back(t.substr(t.find_first_not_of(' ')));
  return out;
}

std::vector<std::string> interesting_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size() && out.size() < 2) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    std::string lower = line;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower.find("error") != std::string::npos || lower.find("fail") != std::string::npos ||
        lower.find("exception") != std::string::npos || lower.find("错误") != std::string::npos) {
      out.push_back(clip(one_line(line), 160));
    }
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

std::vector<std::string> paths_in(const std::string& text) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  size_t i = 0;
  while (i < text.size() && out.size() < 5) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    std::string tok = text.substr(i, j - i);
    while (!tok.empty() && std::string_view("\"'`,;:()[]{}").find(tok.back()) != std::string_view::npos) tok.pop_back();
    while (!tok.empty() && std::string_view("\"'`([{").find(tok.front()) != std::string_view::npos) tok.erase(0, 1);
    if (tok.size() >= 3 && tok.size() <= 120 && tok.find('/') != std::string::npos && tok.find('.') != std::string::npos &&
        tok.find("://") == std::string::npos && seen.insert(tok).second) {
      out.push_back(tok);
    }
    i = j;
  }
  return out;
}

uint64_t last_user_index(const Conversation& c) {
  for (uint64_t i = c.length; i > c.first_kept(); --i) {
    if (c.at(i - 1).message.value("role", "") == "user") return i - 1;
  }
  return c.length;
}

// Moves the cut to `u` (a later user turn), dropping the kept messages before it.
void apply_cut(Conversation& c, uint64_t u) {
  const uint64_t first = c.first_kept();
  if (u <= first) return;
  c.kept.erase(c.kept.begin(), c.kept.begin() + static_cast<std::ptrdiff_t>(u - first));
  c.cut = u;
  if (c.summary && c.summary->anchor < u) c.summary->anchor = u;
}

// compact()'s time limit. Every step of the ladder counts through a check of it, so it is
// checked before each engine call (one call is bounded by the counter's own time limit). The
// model summary does not count against it: it has its own time-out and an extractive
// fallback, and an engine slowed by load must cost the turn time, not fail it.
class TimeLimit {
  using Clock = std::chrono::steady_clock;

 public:
  explicit TimeLimit(std::chrono::milliseconds limit)
      : limit_(limit), deadline_(limit.count() > 0 ? Clock::now() + limit : Clock::time_point::max()) {}
  void exclude(Clock::duration spent) {
    if (deadline_ != Clock::time_point::max()) deadline_ += spent;
  }
  Status check() const {
    if (Clock::now() < deadline_) return {};
    return Error(fmt::format("compaction took longer than {} ms (kvgate up --compaction-timeout) and was abandoned; "
                             "the conversation is too long to compact in time: send a shorter history",
                             limit_.count()));
  }

 private:
  std::chrono::milliseconds limit_;
  Clock::time_point deadline_;
};

}  // namespace

std::string extractive_summary(const Conversation& c, uint64_t until, size_t max_chars) {
  std::string out;
  if (c.summary) out += "Earlier: " + one_line(clip(c.summary->text, max_chars / 3)) + "\n";
  for (uint64_t i = c.first_kept(); i < until && i < c.length; ++i) {
    const json& m = c.at(i).message;
    const std::string role = m.value("role", "?");
    const std::string text = message_text(m);
    std::string line = "- " + role + ":";
    auto s = sentences(text);
    if (!s.empty()) line += " " + clip(s.front(), 160);
    if (s.size() > 1) line += " … " + clip(s.back(), 160);
    if (auto calls = m.find("tool_calls"); calls != m.end() && calls->is_array()) {
      for (const auto& call : *calls) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
        const json& fn = call["function"];
        const std::string args = fn.contains("arguments") && fn["arguments"].is_string() ? fn["arguments"].get<std::string>()
                                                                                         : std::string();
        line += fmt::format(" called {}({})", fn.value("name", "?"), clip(one_line(args), 120));
      }
    }
    for (const auto& l : interesting_lines(text)) line += " | " + l;
    auto paths = paths_in(text);
    if (!paths.empty()) line += " [" + fmt::format("{}", fmt::join(paths, ", ")) + "]";
    out += line + "\n";
  }
  if (out.size() > max_chars) {
    // Keep the start (the earliest context) and the end (the latest), cut the middle.
    const size_t head = utf8_floor(out, max_chars / 2);
    size_t tail = out.size() - (max_chars - head);
    while (tail < out.size() && (static_cast<unsigned char>(out[tail]) & 0xC0) == 0x80) ++tail;
    out = out.substr(0, head) + "\n…\n" + out.substr(tail);
  }
  return out;
}

namespace {

// The first of `candidates` (ascending history indices) for which `fits` holds, when views
// shrink as the index grows (once it holds, it holds for every later one): binary search,
// the last candidate tried first. None when not even the last fits.
template <typename Fits>
Result<std::optional<uint64_t>> first_fitting(const std::vector<uint64_t>& candidates, Fits&& fits) {
  if (candidates.empty()) return std::optional<uint64_t>();
  size_t lo = 0;
  size_t hi = candidates.size() - 1;
  KV_ASSIGN_OR_RETURN(bool last_fits, fits(candidates[hi]));
  if (!last_fits) return std::optional<uint64_t>();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    KV_ASSIGN_OR_RETURN(bool ok, fits(candidates[mid]));
    if (ok) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return std::optional<uint64_t>(candidates[lo]);
}

// One compaction in progress: the conversation being changed, its counted size, and the
// counting functions bounded by the compaction's time limit. Each level is a method.
class Compaction {
 public:
  Compaction(const Conversation& c, uint64_t target, uint64_t first_new, const ViewCountFn& count_view,
             const TextCountFn& count_text, const SummarizeFn& summarize, const CompactionOptions& opt)
      : target_(target),
        first_new_(first_new),
        count_view_fn_(count_view),
        count_text_fn_(count_text),
        summarize_(summarize),
        opt_(opt),
        limit_(opt.time_limit) {
    r_.conversation = c;
  }

  Result<CompactionResult> run() {
    Conversation& cv = r_.conversation;
    KV_ASSIGN_OR_RETURN(r_.tokens_before, count_view(build_view(cv)));
    tokens_ = r_.tokens_before;
    r_.level = "L1";
    last_user_ = last_user_index(cv);
    // L1: over-long single messages.
    KV_ASSIGN_OR_RETURN(bool l1_changed, truncate_long(opt_.l1_threshold_tokens, opt_.l1_keep_tokens));
    if (l1_changed) KV_TRY(recount());
    if (tokens_ <= target_) return finish();
    // L2: summarise the oldest turns. Candidate cuts are user turns after the current cut.
    for (uint64_t i = cv.first_kept() + 1; i <= last_user_ && i < cv.length; ++i) {
      if (cv.at(i).message.value("role", "") == "user") cuts_.push_back(i);
    }
    if (!cuts_.empty() && opt_.summaries) KV_TRY(summarise_oldest());
    KV_TRY(drop_more());
    if (tokens_ > target_ && tokens_ <= opt_.fit_tokens) return finish();
    if (tokens_ > target_) {
      return Error(fmt::format("the conversation cannot be made to fit: the system message and the newest user "
                               "message alone take {} tokens, more than the {} available; shorten that message or "
                               "raise the context",
                               tokens_, target_));
    }
    return finish();
  }

 private:
  Result<uint64_t> count_view(const json& view) {
    KV_TRY(limit_.check());
    return count_view_fn_(view);
  }
  Result<uint64_t> count_text(const std::string& text) {
    KV_TRY(limit_.check());
    return count_text_fn_(text);
  }
  Status recount() {
    KV_ASSIGN_OR_RETURN(tokens_, count_view(build_view(r_.conversation)));
    return {};
  }
  CompactionResult finish() {
    r_.tokens_after = tokens_;
    ++r_.conversation.generation;
    return std::move(r_);
  }

  // Truncates every message (but the newest user message) longer than `threshold` tokens to
  // `keep` tokens, head and tail; true when one was.
  Result<bool> truncate_long(uint64_t threshold, uint64_t keep) {
    Conversation& cv = r_.conversation;
    bool changed = false;
    for (uint64_t i = cv.first_kept(); i < cv.length; ++i) {
      const StoredMessage& m = cv.at(i);
      if (i == last_user_) continue;  // the newest user message stays whole
      if (cv.truncations.count(m.hash)) continue;
      const std::string text = message_text(m.message);
      if (text.size() <= threshold) continue;  // a token is at least one byte
      KV_ASSIGN_OR_RETURN(uint64_t n, count_text(text));
      if (n <= threshold || n <= keep) continue;
      const double bytes_per_token = static_cast<double>(text.size()) / static_cast<double>(n);
      Truncation t;
      t.head_chars = static_cast<size_t>(static_cast<double>(keep) * 0.75 * bytes_per_token);
      t.tail_chars = static_cast<size_t>(static_cast<double>(keep) * 0.25 * bytes_per_token);
      t.elided_tokens = n - keep;
      cv.truncations[m.hash] = t;
      ++r_.truncated_messages;
      changed = true;
    }
    return changed;
  }

  // The smallest cut whose view (plus the summary it will get) fits; views shrink as the cut
  // moves later, so binary search. The last cut when none fits.
  Result<uint64_t> smallest_fitting_cut() {
    const uint64_t summary_allowance = opt_.summary_max_tokens + 40;
    auto fits_with_cut = [&](uint64_t u) -> Result<bool> {
      Conversation probe = r_.conversation;
      apply_cut(probe, u);
      probe.summary.reset();
      KV_ASSIGN_OR_RETURN(uint64_t n, count_view(build_view(probe)));
      return n + summary_allowance <= target_;
    };
    KV_ASSIGN_OR_RETURN(auto first, first_fitting(cuts_, fits_with_cut));
    return first.value_or(cuts_.back());
  }

  // A view small enough to ask the model for the summary of the turns before `u` when the
  // whole view is larger than the engine's context (a pasted history, a first request of
  // several contexts): the oldest turns replaced by their extractive summary, from the
  // earliest user turn on whose view fits with the room the instruction and the summary
  // need. Views shrink as that turn moves later, so binary search. None when not even the
  // last turn before `u` fits.
  Result<std::optional<Conversation>> fitted_for_summary(uint64_t u) {
    const uint64_t room = opt_.summary_max_tokens + kSummaryRequestTokens;
    std::vector<uint64_t> starts;
    for (uint64_t a : cuts_) {
      if (a < u) starts.push_back(a);
    }
    if (starts.empty() || opt_.summary_prompt_limit <= room) return std::optional<Conversation>();
    auto probe_from = [&](uint64_t a) {
      Conversation probe = r_.conversation;
      SummaryNote earlier;
      earlier.text = extractive_summary(probe, a, opt_.summary_max_tokens * 3);
      earlier.covers_until = a;
      earlier.anchor = a;
      earlier.source = "extractive";
      apply_cut(probe, a);
      probe.summary = std::move(earlier);
      return probe;
    };
    auto fits = [&](uint64_t a) -> Result<bool> {
      KV_ASSIGN_OR_RETURN(uint64_t n, count_view(build_view(probe_from(a))));
      return n + room <= opt_.summary_prompt_limit;
    };
    KV_ASSIGN_OR_RETURN(auto first, first_fitting(starts, fits));
    if (!first) return std::optional<Conversation>();
    r_.summary_view_from = *first;
    return std::optional<Conversation>(probe_from(*first));
  }

  // The summary of the messages before cut `u`: the model's when it can and may be asked,
  // else the extractive one; why the model's was not used goes to summary_error.
  std::string summary_text(uint64_t u) {
    std::string text;
    std::optional<Conversation> fitted;
    if (opt_.summary_prompt_limit > 0 && tokens_ > opt_.summary_prompt_limit) {
      auto f = fitted_for_summary(u);
      if (f.ok() && f->has_value()) fitted = std::move(**f);
    }
    if (opt_.summary_prompt_limit > 0 && tokens_ > opt_.summary_prompt_limit && !fitted) {
      r_.summary_error = fmt::format(
          "the view ({} tokens) is larger than the engine's context ({} tokens), and so are its last turns",
          tokens_, opt_.summary_prompt_limit);
    } else if (!limit_.check().ok()) {
      r_.summary_error = "no time left for a model summary";
    } else if (summarize_) {
      const auto asked = std::chrono::steady_clock::now();
      auto s = summarize_(fitted ? *fitted : r_.conversation, u, opt_.summary_max_tokens);
      limit_.exclude(std::chrono::steady_clock::now() - asked);
      if (s.ok() && !s->empty()) {
        text = *s;
        r_.summary_source = "model";
      } else {
        r_.summary_error = s.ok() ? "the model returned an empty summary" : s.error().message();
      }
    } else {
      r_.summary_error = "model summaries are disabled";
    }
    if (text.empty()) {
      text = extractive_summary(r_.conversation, u, opt_.summary_max_tokens * 3);
      r_.summary_source = "extractive";
    }
    return text;
  }

  // L2: cut the oldest turns and put a summary of them in their place.
  Status summarise_oldest() {
    r_.level = "L2";
    KV_ASSIGN_OR_RETURN(const uint64_t u, smallest_fitting_cut());
    SummaryNote note;
    note.text = summary_text(u);
    note.covers_until = u;
    note.after_system = !opt_.summary_after_tail;
    note.anchor = opt_.summary_after_tail ? std::max(first_new_, u) : u;
    note.source = r_.summary_source;
    auto n = count_text(note.text);
    note.tokens = n.ok() ? *n : 0;
    Conversation& cv = r_.conversation;
    r_.dropped_messages += u - cv.first_kept();
    apply_cut(cv, u);
    cv.summary = note;
    return recount();
  }

  // L3: drop whole turns, then the summary, then shorten what follows the newest user
  // message; the system message and that user message stay whole.
  Status drop_more() {
    Conversation& cv = r_.conversation;
    if (tokens_ > target_) {
      r_.level = "L3";
      for (uint64_t u : cuts_) {
        if (u <= cv.first_kept()) continue;
        r_.dropped_messages += u - cv.first_kept();
        apply_cut(cv, u);
        KV_TRY(recount());
        if (tokens_ <= target_) break;
      }
    }
    if (tokens_ > target_ && cv.summary) {
      cv.summary.reset();
      KV_TRY(recount());
    }
    if (tokens_ > target_) {
      KV_ASSIGN_OR_RETURN(bool changed, truncate_long(256, 128));
      if (changed) KV_TRY(recount());
    }
    return {};
  }

  const uint64_t target_;
  const uint64_t first_new_;
  const ViewCountFn& count_view_fn_;
  const TextCountFn& count_text_fn_;
  const SummarizeFn& summarize_;
  const CompactionOptions& opt_;
  TimeLimit limit_;
  CompactionResult r_;
  uint64_t tokens_ = 0;
  uint64_t last_user_ = 0;
  std::vector<uint64_t> cuts_;
};

}  // namespace

Result<CompactionResult> compact(const Conversation& c, uint64_t target, uint64_t first_new,
                                 const ViewCountFn& count_view_fn, const TextCountFn& count_text_fn,
                                 const SummarizeFn& summarize, const CompactionOptions& opt) {
  return Compaction(c, target, first_new, count_view_fn, count_text_fn, summarize, opt).run();
}

}  // namespace kvgate::session
