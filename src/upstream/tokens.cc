#include "upstream/tokens.h"

#include <fmt/format.h>

#include "session/normalize.h"
#include "util/json.h"
#include "util/time.h"

namespace kvgate::gateway {

using session::hash64;

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kTimeout = std::chrono::seconds(120);

// Candidates for special tokens: "<|...|>" and "<word>"/"</word>" style markers.
size_t candidate_length(std::string_view s, size_t i) {
  if (s[i] != '<') return 0;
  const size_t limit = std::min(s.size(), i + 48);
  for (size_t j = i + 1; j < limit; ++j) {
    const char c = s[j];
    if (c == '>') return j - i >= 2 ? j - i + 1 : 0;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '|' || c == '/' || c == '-' || c == '.' || c == ':';
    if (!ok) return 0;
  }
  return 0;
}

}  // namespace

const char* counting_name(Counting c) {
  switch (c) {
    case Counting::kRender:
      return "render";
    case Counting::kChatTokenize:
      return "chat-tokenize";
    case Counting::kEstimate:
      return "estimate";
  }
  return "?";
}

bool is_count_time_limit(const Error& e) { return e.message().starts_with(kCountTimeLimitMessage); }

TokenCounter::Deadline TokenCounter::deadline() const {
  if (time_limit_.count() <= 0) return Deadline::max();
  return Clock::now() + time_limit_;
}

Result<std::chrono::milliseconds> TokenCounter::remaining(Deadline deadline) const {
  if (deadline == Deadline::max()) return std::chrono::milliseconds(kTimeout);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) {
    return Error(fmt::format("{} {} ms (kvgate up --count-timeout); the prompt is too long to count in time: send less "
                             "text",
                             kCountTimeLimitMessage, time_limit_.count()));
  }
  return std::min<std::chrono::milliseconds>(left, kTimeout);
}

Result<std::vector<int64_t>> TokenCounter::tokenize(std::string_view text, Deadline deadline) {
  KV_ASSIGN_OR_RETURN(auto wait, remaining(deadline));
  nlohmann::json req = {{"content", text}, {"add_special", false}, {"parse_special", true}};
  auto res = upstream_.call("POST", "/tokenize", util::json_text(req), wait);
  if (!res.ok()) {
    KV_TRY(remaining(deadline));  // the engine call ran out of the time left
    return Error("tokenize: " + res.error().message);
  }
  const UpstreamResponse& r = *res;
  if (r.status != 200) return Error(fmt::format("tokenize: engine answered {}: {}", r.status, r.body.substr(0, 300)));
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("tokens") || !j["tokens"].is_array()) return Error("tokenize: unexpected answer");
  std::vector<int64_t> out;
  out.reserve(j["tokens"].size());
  for (const auto& t : j["tokens"]) out.push_back(t.is_number_integer() ? t.get<int64_t>() : -1);
  return out;
}

Result<bool> TokenCounter::is_splitting_special(const std::string& candidate, Deadline deadline) {
  {
    std::lock_guard lock(mu_);
    if (auto it = specials_.find(candidate); it != specials_.end()) return it->second;
  }
  // A special token is one token on its own and splits the text around it: "x<c>x" is
  // tokens("x") + 1 + tokens("x").
  KV_ASSIGN_OR_RETURN(auto alone, tokenize(candidate, deadline));
  bool special = alone.size() == 1;
  if (special) {
    KV_ASSIGN_OR_RETURN(auto x, tokenize("x", deadline));
    KV_ASSIGN_OR_RETURN(auto around, tokenize("x" + candidate + "x", deadline));
    special = around.size() == 2 * x.size() + 1 && around[x.size()] == alone[0];
  }
  std::lock_guard lock(mu_);
  specials_[candidate] = special;
  return special;
}

Result<uint64_t> TokenCounter::count_pieces(std::string_view prompt, TokenCount& out, Deadline deadline) {
  // Split at verified special tokens.
  std::vector<std::string_view> pieces;
  uint64_t specials = 0;
  size_t piece_start = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const size_t n = candidate_length(prompt, i);
    if (n == 0) continue;
    KV_ASSIGN_OR_RETURN(bool special, is_splitting_special(std::string(prompt.substr(i, n)), deadline));
    if (!special) continue;
    if (i > piece_start) pieces.push_back(prompt.substr(piece_start, i - piece_start));
    ++specials;
    i += n - 1;
    piece_start = i + 1;
  }
  if (piece_start < prompt.size()) pieces.push_back(prompt.substr(piece_start));
  out.pieces = pieces.size();

  uint64_t total = specials;
  for (std::string_view piece : pieces) {
    const uint64_t key = hash64(piece);
    {
      std::lock_guard lock(mu_);
      if (auto it = piece_tokens_.find(key); it != piece_tokens_.end()) {
        total += it->second;
        ++stats_.cache_hits;
        continue;
      }
    }
    const auto t0 = Clock::now();
    KV_ASSIGN_OR_RETURN(auto toks, tokenize(piece, deadline));
    out.tokenize_ms += util::ms_since(t0);
    ++out.new_pieces;
    out.new_chars += piece.size();
    total += toks.size();
    std::lock_guard lock(mu_);
    if (piece_tokens_.size() >= max_cached_) piece_tokens_.clear();  // crude bound; rebuilt on demand
    piece_tokens_[key] = static_cast<uint32_t>(toks.size());
    ++stats_.pieces_tokenized;
    stats_.chars_tokenized += piece.size();
  }
  return total;
}

Result<TokenCount> TokenCounter::count(const nlohmann::json& body, std::string_view tools_text) {
  if (counting_ != Counting::kRender) {
    return count(body, body.value("messages", nlohmann::json::array()), tools_text);
  }
  return count_request(util::json_text_with(body, {"tools", tools_text}));
}

Result<TokenCount> TokenCounter::count(const nlohmann::json& body, const nlohmann::json& messages,
                                       std::string_view tools_text) {
  if (counting_ == Counting::kChatTokenize) return count_chat(body, messages, tools_text);
  if (counting_ == Counting::kEstimate) {
    KV_ASSIGN_OR_RETURN(uint64_t n, estimate(TokenEstimate::units(body, messages)));
    std::lock_guard lock(mu_);
    ++stats_.counts;
    return TokenCount{.tokens = n, .estimated = true};
  }
  return count_request(util::json_text_with(body, "messages", messages, {"tools", tools_text}));
}

Result<uint64_t> TokenCounter::estimate(uint64_t units) const {
  if (auto n = estimate_.estimate(units)) return *n;
  return Error(
      "the server cannot count tokens (no /apply-template) and has answered no prompt yet, so there is no "
      "estimate");
}

void TokenCounter::learn(const nlohmann::json& body, const nlohmann::json& messages, uint64_t engine_tokens) {
  if (estimating()) estimate_.learn(TokenEstimate::units(body, messages), engine_tokens);
}

Result<TokenCount> TokenCounter::count_request(const std::string& render_text) {
  TokenCount out;
  const auto t0 = Clock::now();
  const Deadline until = deadline();
  KV_ASSIGN_OR_RETURN(auto wait, remaining(until));
  auto res = upstream_.call("POST", "/apply-template", render_text, wait);
  if (!res.ok()) {
    KV_TRY(remaining(until));
    return Error("apply-template: " + res.error().message);
  }
  const UpstreamResponse& r = *res;
  if (r.status != 200) {
    return Error(fmt::format("apply-template: engine answered {}: {}", r.status, r.body.substr(0, 500)));
  }
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("prompt") || !j["prompt"].is_string()) {
    return Error("apply-template: unexpected answer from the engine");
  }
  out.prompt = j["prompt"].get<std::string>();
  out.render_ms = util::ms_since(t0);
  KV_ASSIGN_OR_RETURN(uint64_t n, count_pieces(out.prompt, out, until));
  std::lock_guard lock(mu_);
  out.tokens = with_offset(n);
  ++stats_.counts;
  return out;
}

uint64_t TokenCounter::with_offset(uint64_t n) const {
  // A learned offset never makes a count negative (an engine that under-reports).
  return static_cast<uint64_t>(std::max<int64_t>(0, static_cast<int64_t>(n) + offset_.value_or(0)));
}

Result<uint64_t> TokenCounter::server_count(const std::string& req_text, Deadline deadline) {
  KV_ASSIGN_OR_RETURN(auto wait, remaining(deadline));
  auto res = upstream_.call("POST", "/tokenize", req_text, wait);
  if (!res.ok()) {
    KV_TRY(remaining(deadline));
    return Error("tokenize: " + res.error().message);
  }
  const UpstreamResponse& r = *res;
  if (r.status != 200)
    return Error(fmt::format("tokenize: server answered {}: {}", r.status, r.body.substr(0, 300)));
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("count") || !j["count"].is_number_unsigned()) {
    return Error("tokenize: the server's answer has no count");
  }
  return j["count"].get<uint64_t>();
}

Result<TokenCount> TokenCounter::count_chat(const nlohmann::json& body, const nlohmann::json& messages,
                                            std::string_view tools_text) {
  nlohmann::json req = {{"messages", messages}, {"add_generation_prompt", true}};
  if (auto m = body.find("model"); m != body.end() && m->is_string()) {
    req["model"] = *m;
  } else if (!model_.empty()) {
    req["model"] = model_;
  }
  if (auto t = body.find("tools"); t != body.end() && t->is_array() && !t->empty()) req["tools"] = *t;
  if (auto k = body.find("chat_template_kwargs"); k != body.end() && k->is_object())
    req["chat_template_kwargs"] = *k;
  TokenCount out;
  const auto t0 = Clock::now();
  KV_ASSIGN_OR_RETURN(uint64_t n, server_count(util::json_text_with(req, {"tools", tools_text}), deadline()));
  out.tokenize_ms = util::ms_since(t0);
  std::lock_guard lock(mu_);
  out.tokens = with_offset(n);
  ++stats_.counts;
  return out;
}

Result<uint64_t> TokenCounter::count_chat_text(std::string_view text) {
  const uint64_t key = hash64(text);
  {
    std::lock_guard lock(mu_);
    if (auto it = piece_tokens_.find(key); it != piece_tokens_.end()) {
      ++stats_.cache_hits;
      return it->second;
    }
  }
  nlohmann::json req = {{"prompt", text}, {"add_special_tokens", false}};
  if (!model_.empty()) req["model"] = model_;
  KV_ASSIGN_OR_RETURN(uint64_t n, server_count(util::json_text(req), deadline()));
  std::lock_guard lock(mu_);
  if (piece_tokens_.size() >= max_cached_) piece_tokens_.clear();
  piece_tokens_[key] = static_cast<uint32_t>(n);
  ++stats_.pieces_tokenized;
  stats_.chars_tokenized += text.size();
  return n;
}

Result<uint64_t> TokenCounter::count_text(std::string_view text) {
  if (counting_ == Counting::kChatTokenize) return count_chat_text(text);
  if (estimating()) return estimate(TokenEstimate::text_units(text));
  TokenCount scratch;
  return count_pieces(text, scratch, deadline());
}

int64_t TokenCounter::calibrate(uint64_t counted, uint64_t engine_prompt_tokens) {
  std::lock_guard lock(mu_);
  const int64_t diff = static_cast<int64_t>(engine_prompt_tokens) - static_cast<int64_t>(counted);
  if (estimating()) return diff;  // an estimate's error, not an offset
  if (!offset_) {
    offset_ = diff;
    return diff;
  }
  if (diff != 0) {
    ++stats_.mismatches;
  }
  return diff;
}

int64_t TokenCounter::offset() const {
  std::lock_guard lock(mu_);
  return offset_.value_or(0);
}

TokenCounter::Stats TokenCounter::stats() const {
  Stats s;
  {
    std::lock_guard lock(mu_);
    s = stats_;
  }
  if (estimating()) s.tokens_per_unit = estimate_.rate();
  return s;
}

}  // namespace kvgate::gateway
