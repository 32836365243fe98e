#include "upstream/reply.h"

namespace kvgate::gateway {

using nlohmann::json;

namespace {

uint64_t u64(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return 0;
  const double v = it->get<double>();
  if (!(v > 0)) return 0;
  return v < 1e18 ? static_cast<uint64_t>(v) : uint64_t{1'000'000'000'000'000'000};
}

double num(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<double>() : -1;
}

std::string str(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

Usage usage_from(const json& body) {
  Usage u;
  if (!body.is_object()) return u;
  if (auto usage = body.find("usage"); usage != body.end() && usage->is_object()) {
    u.known = true;
    u.prompt_tokens = u64(*usage, "prompt_tokens");
    u.completion_tokens = u64(*usage, "completion_tokens");
    if (auto d = usage->find("prompt_tokens_details"); d != usage->end() && d->is_object()) {
      u.cached_tokens = u64(*d, "cached_tokens");
    }
  }
  if (auto t = body.find("timings"); t != body.end() && t->is_object()) {
    if (t->contains("cache_n")) u.cached_tokens = u64(*t, "cache_n");
    if (t->contains("prompt_n")) {
      u.prefilled_tokens = u64(*t, "prompt_n");
      if (!u.known) u.prompt_tokens = u.prefilled_tokens + u.cached_tokens;
      u.known = true;
    }
    if (u.completion_tokens == 0) u.completion_tokens = u64(*t, "predicted_n");
    u.prompt_ms = num(*t, "prompt_ms");
    u.prompt_per_token_ms = num(*t, "prompt_per_token_ms");
    u.predicted_per_second = num(*t, "predicted_per_second");
  }
  if (u.known && u.prefilled_tokens == 0 && u.prompt_tokens >= u.cached_tokens) {
    u.prefilled_tokens = u.prompt_tokens - u.cached_tokens;
  }
  return u;
}

CompletionFigures completion_figures(const json& ev) {
  CompletionFigures f;
  if (!ev.is_object()) return f;
  auto t = ev.find("timings");
  const bool timings = t != ev.end() && t->is_object();
  const uint64_t prefilled = timings ? u64(*t, "prompt_n") : 0;
  if (timings && t->contains("cache_n")) {
    f.cached_tokens = u64(*t, "cache_n");
    f.prompt_tokens = f.cached_tokens + prefilled;
    f.known = true;
  } else if (ev.contains("tokens_evaluated")) {
    f.prompt_tokens = u64(ev, "tokens_evaluated");
    f.cached_tokens = f.prompt_tokens >= prefilled ? f.prompt_tokens - prefilled : 0;
    f.known = timings;
  }
  f.generated_tokens = timings && t->contains("predicted_n") ? u64(*t, "predicted_n") : u64(ev, "tokens_predicted");
  return f;
}

void ReplyAccumulator::add_chunk(const json& chunk) {
  if (!chunk.is_object()) return;
  if (auto e = chunk.find("error"); e != chunk.end()) error_ = *e;
  if (chunk.contains("usage") || chunk.contains("timings")) {
    Usage u = usage_from(chunk);
    if (u.known) usage_ = u;
  }
  if (auto p = chunk.find("prompt_progress"); p != chunk.end() && p->is_object()) {
    progress_ = {.total = u64(*p, "total"), .cache = u64(*p, "cache"), .processed = u64(*p, "processed"), .known = true};
  }
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array()) return;
  for (const auto& c : *choices) {
    if (!c.is_object()) continue;
    if (auto fr = c.find("finish_reason"); fr != c.end() && fr->is_string()) finish_reason_ = fr->get<std::string>();
    auto delta = c.find("delta");
    if (delta == c.end() || !delta->is_object()) continue;
    if (auto s = delta->find("content"); s != delta->end() && s->is_string() && !s->get_ref<const std::string&>().empty()) {
      content_ += s->get<std::string>();
      has_output_ = true;
    }
    if (auto s = delta->find("reasoning_content"); s != delta->end() && s->is_string() &&
                                                   !s->get_ref<const std::string&>().empty()) {
      reasoning_ += s->get<std::string>();
      has_output_ = true;
    }
    if (auto tc = delta->find("tool_calls"); tc != delta->end() && tc->is_array()) {
      for (const auto& piece : *tc) {
        if (!piece.is_object()) continue;
        const int64_t index = piece.value("index", static_cast<int64_t>(calls_.size()));
        Call& call = calls_[index];
        if (auto id = str(piece, "id"); !id.empty()) call.id = id;
        if (auto fn = piece.find("function"); fn != piece.end() && fn->is_object()) {
          if (auto name = str(*fn, "name"); !name.empty()) call.name += name;
          call.arguments += str(*fn, "arguments");
        }
        has_output_ = true;
      }
    }
  }
}

void ReplyAccumulator::set_response(const json& response) {
  usage_ = usage_from(response);
  if (auto e = response.find("error"); e != response.end()) error_ = *e;
  auto choices = response.find("choices");
  if (choices == response.end() || !choices->is_array() || choices->empty()) return;
  const json& c = (*choices)[0];
  if (!c.is_object()) return;
  finish_reason_ = str(c, "finish_reason");
  auto msg = c.find("message");
  if (msg == c.end() || !msg->is_object()) return;
  content_ = str(*msg, "content");
  reasoning_ = str(*msg, "reasoning_content");
  if (auto tc = msg->find("tool_calls"); tc != msg->end() && tc->is_array()) {
    int64_t i = 0;
    for (const auto& call : *tc) {
      if (!call.is_object()) continue;
      Call& out = calls_[i++];
      out.id = str(call, "id");
      if (auto fn = call.find("function"); fn != call.end() && fn->is_object()) {
        out.name = str(*fn, "name");
        out.arguments = str(*fn, "arguments");
      }
    }
  }
  has_output_ = !content_.empty() || !reasoning_.empty() || !calls_.empty();
}

json ReplyAccumulator::message() const {
  json m = {{"role", "assistant"}, {"content", calls_.empty() || !content_.empty() ? json(content_) : json(nullptr)}};
  if (!calls_.empty()) {
    json calls = json::array();
    for (const auto& [index, c] : calls_) {
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    m["tool_calls"] = calls;
  }
  return m;
}

}  // namespace kvgate::gateway
