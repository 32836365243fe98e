#include "gateway/chat_request.h"

#include <limits>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "gateway/request_checks.h"
#include "gateway/request_limits.h"
#include "rescue/relaxed_json.h"
#include "util/json.h"

namespace kvgate::gateway {

using rescue::sanitize_utf8;

namespace {

using nlohmann::json;

const char* kind(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "an unknown value";
  }
}

ApiError wrong_type(const std::string& path, const char* expected, const json& got) {
  return bad_request(fmt::format("{} must be {}, got {}", path, expected, kind(got)), path, "invalid_type");
}

ApiStatus check_content(const json& content, const std::string& path, const std::string& role) {
  if (content.is_string()) return {};
  if (content.is_null()) {
    if (role == "assistant" || role == "tool") return {};
    return bad_request(fmt::format("{} must not be null for a {} message", path, role), path, "invalid_value");
  }
  if (!content.is_array()) return wrong_type(path, "a string or an array of content parts", content);
  for (size_t i = 0; i < content.size(); ++i) {
    const auto& part = content[i];
    const std::string p = fmt::format("{}[{}]", path, i);
    if (!part.is_object()) return wrong_type(p, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) return bad_request(p + ".type must be a string", p + ".type", "invalid_type");
    if (*type == "text") {
      auto text = part.find("text");
      if (text == part.end() || !text->is_string()) return bad_request(p + ".text must be a string", p + ".text", "invalid_type");
    }
  }
  return {};
}

ApiStatus check_tool_calls(const json& calls, const std::string& path) {
  if (!calls.is_array()) return wrong_type(path, "an array", calls);
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", path, i);
    const auto& c = calls[i];
    if (!c.is_object()) return wrong_type(p, "an object", c);
    auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) return bad_request(p + ".function must be an object", p + ".function", "invalid_type");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) {
      return bad_request(p + ".function.name must be a string", p + ".function.name", "invalid_type");
    }
    // Arguments that are not valid JSON are repaired later, not rejected here.
    auto args = fn->find("arguments");
    if (args != fn->end() && !args->is_string() && !args->is_object() && !args->is_null()) {
      return wrong_type(p + ".function.arguments", "a string", *args);
    }
  }
  return {};
}

ApiStatus check_int(const json& body, const char* key, int64_t min, int64_t max) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_number_integer()) return wrong_type(key, "an integer", *it);
  // An unsigned value above int64's range (18446744073709551615) must not wrap to -1.
  const bool too_big = it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(max)
                                                : it->get<int64_t>() > max;
  if (too_big || (!it->is_number_unsigned() && it->get<int64_t>() < min)) {
    return bad_request(fmt::format("{} must be from {} to {} (-1: no limit)", key, min, max), std::string(key),
                       "invalid_value");
  }
  return {};
}

// How many alternatives per token an answer lists (top_logprobs, n_probs, the completions
// API's integer logprobs): at most kMaxTopLogprobs, as OpenAI's API allows. The engine keeps
// the list for every generated token, and the answer grows with it.
ApiStatus check_probs(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null() || it->is_boolean()) return {};
  if (!it->is_number_integer()) return wrong_type(key, "an integer", *it);
  const bool out_of_range = it->is_number_unsigned()
                                ? it->get<uint64_t>() > static_cast<uint64_t>(kMaxTopLogprobs)
                                : it->get<int64_t>() < 0 || it->get<int64_t>() > kMaxTopLogprobs;
  if (out_of_range) {
    return bad_request(fmt::format("{} must be from 0 to {}", key, kMaxTopLogprobs), std::string(key),
                       "invalid_value");
  }
  return {};
}

}  // namespace

namespace {

template <typename Json>
ApiResult<Json> parse_body_as(std::string_view text, size_t max_depth) {
  // The bound is checked by a linear scan before parsing, so no deeper value is ever built.
  // (nlohmann's parser callback could check it too, but costs about 100 times the parse:
  // 24 s instead of 0.26 s for 100,000 small messages.)
  auto param = [](std::string p) { return p.empty() ? std::nullopt : std::optional<std::string>(std::move(p)); };
  if (const JsonTextScan scan = scan_json_text(text, max_depth); scan.exceeded) {
    return bad_request(fmt::format("request body nests deeper than {} levels at byte {}{}", max_depth, scan.offset,
                                   scan.path.empty() ? std::string() : " (inside " + scan.path + ")"),
                       param(scan.path), "nesting_too_deep");
  }
  try {
    return Json::parse(text);
  } catch (const json::parse_error& e) {
    // e.what() names the byte position and what was expected; it quotes the bytes it last
    // read, which may be the invalid UTF-8 it refused.
    const std::string at = scan_json_text(text, max_depth, e.byte > 0 ? e.byte - 1 : 0).path;
    return bad_request(fmt::format("request body is not valid JSON{}: {}", at.empty() ? "" : " (in " + at + ")",
                                   sanitize_utf8(e.what())),
                       param(at), "invalid_json");
  } catch (const json::exception& e) {
    // out_of_range.406: a number beyond double's range (1e999999, a 400-digit integer).
    const size_t number = first_overflowing_number(text);
    const std::string at = number == std::string_view::npos ? "" : scan_json_text(text, max_depth, number).path;
    return bad_request(fmt::format("{} holds a number kvgate cannot represent: {}", at.empty() ? "the body" : at,
                                   sanitize_utf8(e.what())),
                       param(at), "invalid_number");
  }
}

}  // namespace

std::string tools_as_written(std::string_view written, const json& body) {
  auto tools = body.find("tools");
  if (written.empty() || tools == body.end() || !tools->is_array() || tools->empty()) return {};
  const auto ordered = nlohmann::ordered_json::parse(written, nullptr, false);
  if (ordered.is_discarded() || json(ordered) != *tools) return {};
  return util::json_text(ordered);
}

ApiResult<json> parse_json_body(std::string_view text, size_t max_depth) { return parse_body_as<json>(text, max_depth); }

ApiResult<nlohmann::ordered_json> parse_client_json_body(std::string_view text, size_t max_depth) {
  return parse_body_as<nlohmann::ordered_json>(text, max_depth);
}

ApiStatus validate_chat_body(const json& body) {
  if (!body.is_object()) return bad_request(fmt::format("request body must be a JSON object, got {}", kind(body)));
  auto messages = body.find("messages");
  if (messages == body.end()) return bad_request("messages is required", "messages", "missing_field");
  if (!messages->is_array()) return wrong_type("messages", "an array", *messages);
  if (messages->empty()) return bad_request("messages must contain at least one message", "messages", "invalid_value");
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool", "function"};
  for (size_t i = 0; i < messages->size(); ++i) {
    const auto& m = (*messages)[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(p, "an object", m);
    auto role = m.find("role");
    if (role == m.end()) return bad_request(p + ".role is required", p + ".role", "missing_field");
    if (!role->is_string()) return wrong_type(p + ".role", "a string", *role);
    const std::string r = role->get<std::string>();
    if (kRoles.count(r) == 0) {
      return bad_request(fmt::format("{}.role '{}' must be one of system, developer, user, assistant, tool", p, r),
                         p + ".role", "invalid_value");
    }
    auto content = m.find("content");
    if (content == m.end()) {
      if (r != "assistant") return bad_request(p + ".content is required", p + ".content", "missing_field");
    } else {
      KV_TRY(check_content(*content, p + ".content", r));
    }
    if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
      KV_TRY(check_tool_calls(*calls, p + ".tool_calls"));
    }
    for (const char* key : {"name", "tool_call_id", "reasoning_content"}) {
      auto it = m.find(key);
      if (it != m.end() && !it->is_string() && !it->is_null()) return wrong_type(p + "." + key, "a string", *it);
    }
  }
  if (auto s = body.find("stream"); s != body.end() && !s->is_boolean() && !s->is_null()) {
    return wrong_type("stream", "a boolean", *s);
  }
  if (auto n = body.find("n"); n != body.end() && !n->is_null()) {
    if (!n->is_number_integer()) return wrong_type("n", "an integer", *n);
    if (n->get<int64_t>() != 1) return bad_request("only n = 1 is supported", "n", "unsupported_value");
  }
  for (const char* key : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    KV_TRY(check_int(body, key, -1, kMaxReplyTokens));
  }
  for (const char* key : {"top_logprobs", "n_probs"}) KV_TRY(check_probs(body, key));
  if (auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return wrong_type("tools", "an array", *tools);
    for (size_t i = 0; i < tools->size(); ++i) {
      const auto& t = (*tools)[i];
      const std::string p = fmt::format("tools[{}]", i);
      if (!t.is_object()) return wrong_type(p, "an object", t);
      auto fn = t.find("function");
      if (fn == t.end() || !fn->is_object()) return bad_request(p + ".function must be an object", p + ".function", "invalid_type");
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
        return bad_request(p + ".function.name must be a non-empty string", p + ".function.name", "invalid_value");
      }
    }
  }
  for (const char* key : {"model", "user"}) {
    auto it = body.find(key);
    if (it != body.end() && !it->is_string() && !it->is_null()) return wrong_type(key, "a string", *it);
  }
  // The fields that name a conversation are ids kvgate keeps (request_checks.h).
  for (const char* key : {"user", "prompt_cache_key"}) {
    auto it = body.find(key);
    if (it != body.end() && it->is_string()) KV_TRY(check_client_id(it->get_ref<const std::string&>(), key));
  }
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null() && !so->is_object()) {
    return wrong_type("stream_options", "an object", *so);
  }
  if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null() && !kw->is_object()) {
    return wrong_type("chat_template_kwargs", "an object", *kw);
  }
  return {};
}

ApiStatus validate_completion_body(const json& body) {
  if (!body.is_object()) return bad_request(fmt::format("request body must be a JSON object, got {}", kind(body)));
  if (!body.contains("prompt")) return bad_request("prompt is required", "prompt", "missing_field");
  if (auto s = body.find("stream"); s != body.end() && !s->is_boolean() && !s->is_null()) {
    return wrong_type("stream", "a boolean", *s);
  }
  for (const char* key : {"max_tokens", "n_predict"}) {
    KV_TRY(check_int(body, key, -1, kMaxReplyTokens));
  }
  // The completions API's `logprobs` is the count itself.
  for (const char* key : {"logprobs", "top_logprobs", "n_probs"}) KV_TRY(check_probs(body, key));
  return {};
}

ApiResult<ChatRequest> parse_chat_request(std::string_view text) {
  KV_ASSIGN_OR_RETURN(json body, parse_json_body(text));
  return make_chat_request(std::move(body));
}

StreamFlags stream_flags(const json& b) {
  StreamFlags f;
  if (!b.is_object()) return f;
  // json::value() throws when the field holds another type (null included): compare instead.
  f.stream = b.contains("stream") && b["stream"] == true;
  if (auto so = b.find("stream_options"); so != b.end() && so->is_object()) {
    f.include_usage = so->contains("include_usage") && (*so)["include_usage"] == true;
  }
  return f;
}

ApiResult<ChatRequest> make_chat_request(json body) {
  KV_TRY(validate_chat_body(body));
  ChatRequest out;
  out.body = std::move(body);
  const json& b = out.body;
  const StreamFlags flags = stream_flags(b);
  out.stream = flags.stream;
  out.include_usage = flags.include_usage;
  for (const char* key : {"max_completion_tokens", "max_tokens", "n_predict"}) {
    auto it = b.find(key);
    if (it != b.end() && it->is_number_integer()) {
      out.max_tokens = it->get<int64_t>();
      break;
    }
  }
  if (auto m = b.find("model"); m != b.end() && m->is_string()) out.model = m->get<std::string>();
  if (auto u = b.find("user"); u != b.end() && u->is_string() && !u->get_ref<const std::string&>().empty()) {
    out.user = u->get<std::string>();
  }
  out.has_tools = b.contains("tools") && b["tools"].is_array() && !b["tools"].empty();
  return out;
}

}  // namespace kvgate::gateway
