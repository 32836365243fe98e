#include "gateway/request_limits.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gateway/work_limits.h"
#include "rescue/relaxed_json.h"
#include "util/json.h"

namespace kvgate::gateway {

using rescue::sanitize_utf8;

namespace {

using nlohmann::json;

// Bytes of a message's text content (a string, or the text of its text parts).
uint64_t content_bytes(const json& message) {
  auto c = message.find("content");
  if (c == message.end()) return 0;
  if (c->is_string()) return c->get_ref<const std::string&>().size();
  uint64_t n = 0;
  if (c->is_array()) {
    for (const auto& part : *c) {
      if (!part.is_object()) continue;
      auto t = part.find("text");
      if (t != part.end() && t->is_string()) n += t->get_ref<const std::string&>().size();
    }
  }
  return n;
}

ApiStatus check_arguments_depth(const json& messages, size_t max_depth) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object()) continue;
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (size_t k = 0; k < calls->size(); ++k) {
      const json& call = (*calls)[k];
      if (!call.is_object()) continue;
      auto fn = call.find("function");
      if (fn == call.end() || !fn->is_object()) continue;
      auto args = fn->find("arguments");
      if (args == fn->end() || !args->is_string()) continue;
      const size_t at = json_text_depth_exceeded_at(args->get_ref<const std::string&>(), max_depth);
      if (at == std::string_view::npos) continue;
      const std::string path = fmt::format("messages[{}].tool_calls[{}].function.arguments", i, k);
      return bad_request(fmt::format("{} nests deeper than {} levels (at byte {} of the string)", path, max_depth, at),
                         path, "nesting_too_deep");
    }
  }
  return {};
}

// The index of the closing quote of the string that opens at text[quote], or text.size() when
// the text ends inside it.
size_t string_close(std::string_view text, size_t quote) {
  const size_t end = util::json_string_end(text, quote);
  return end == std::string_view::npos ? text.size() : end - 1;
}

}  // namespace

ApiError request_too_large(std::string message) {
  ApiError e = bad_request(std::move(message), std::nullopt, "request_too_large");
  e.status = 413;
  return e;
}

JsonTextScan scan_json_text(std::string_view text, size_t max_depth, size_t stop_at) {
  struct Frame {
    bool object;
    std::string_view key;
    size_t index = 0;
  };
  std::vector<Frame> frames;
  std::string_view last_string;
  JsonTextScan out;
  auto path = [&frames] {
    std::string p;
    for (const auto& f : frames) {
      if (!f.object) {
        p += fmt::format("[{}]", f.index);
      } else if (!f.key.empty()) {
        if (!p.empty()) p += '.';
        p += f.key;
      }
    }
    if (p.size() > 120) p = p.substr(0, 120) + "...";  // 500 levels of "[0]" say nothing more
    return sanitize_utf8(p);
  };
  size_t i = 0;
  for (; i < text.size() && i < stop_at; ++i) {
    const char c = text[i];
    if (c == '"') {
      const size_t begin = i + 1;
      i = string_close(text, i);
      if (i >= stop_at) break;  // stopped inside this string: the path is its key's
      last_string = text.substr(begin, std::min(i, text.size()) - begin);
    } else if (c == '[' || c == '{') {
      if (frames.size() >= max_depth) {
        out.exceeded = true;
        break;
      }
      frames.push_back({c == '{', {}, 0});
    } else if ((c == ']' || c == '}') && !frames.empty()) {
      frames.pop_back();
      if (!frames.empty() && frames.back().object) frames.back().key = {};
    } else if (c == ':' && !frames.empty() && frames.back().object) {
      frames.back().key = last_string;
    } else if (c == ',' && !frames.empty()) {
      if (frames.back().object) {
        frames.back().key = {};
      } else {
        ++frames.back().index;
      }
    }
  }
  out.offset = std::min(i, text.size());
  out.path = path();
  return out;
}

size_t first_overflowing_number(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      i = string_close(text, i);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i + 1;
      while (j < text.size() && std::string_view("0123456789.eE+-").find(text[j]) != std::string_view::npos) ++j;
      const std::string number(text.substr(i, j - i));
      if (std::isinf(std::strtod(number.c_str(), nullptr))) return i;
      i = j - 1;
    }
  }
  return std::string_view::npos;
}

size_t json_text_depth_exceeded_at(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      i = string_close(text, i);
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

ApiStatus check_chat_limits(const json& body, const RequestLimits& limits) {
  if (!body.is_object()) return {};  // validate_chat_body names the problem
  KV_TRY(check_work_limits(body));
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) return {};
  if (messages->size() > limits.max_messages) {
    ApiError e = bad_request(fmt::format("messages has {} entries, more than the limit of {} (kvgate up --max-messages)",
                                         messages->size(), limits.max_messages),
                             "messages", "too_many_messages");
    e.status = 413;
    return e;
  }
  KV_TRY(check_arguments_depth(*messages, limits.max_depth));
  if (limits.context_tokens == 0 || limits.max_token_bytes == 0) return {};
  // The newest user message is never shortened or dropped by compaction (compactor.h).
  for (size_t i = messages->size(); i > 0; --i) {
    const json& m = (*messages)[i - 1];
    if (!m.is_object()) continue;
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || role->get_ref<const std::string&>() != "user") continue;
    const uint64_t bytes = content_bytes(m);
    const uint64_t at_least = bytes / limits.max_token_bytes;
    if (at_least <= limits.context_tokens) return {};
    const std::string path = fmt::format("messages[{}].content", i - 1);
    ApiError e = bad_request(
        fmt::format("{} is {} bytes: at least {} tokens (no token of this model is longer than {} bytes), more than the "
                    "context of {} tokens; compaction keeps the newest user message whole, so this request cannot fit. "
                    "Shorten that message",
                    path, bytes, at_least, limits.max_token_bytes, limits.context_tokens),
        path, "context_length_exceeded");
    return e;
  }
  return {};
}

}  // namespace kvgate::gateway
