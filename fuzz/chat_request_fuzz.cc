// libFuzzer target: a client's chat request body, through what a chat turn does to it before
// any engine sees it (gateway/turn_request.h): JSON parsing, the bounds, history repair,
// validation into a ChatRequest, the thinking policy, historical reasoning dropped, tool
// results put in call order, and the conversation's hash chain. Nothing may crash; a body that validates must keep validating
// after each step (the steps never make a valid request invalid), and the steps are
// deterministic.
//
// Two amplifiers reach what short inputs cannot:
//   - depth: each '@' in the input becomes D opening brackets and each '~' D closing ones,
//     D = 1,000 × the input's first byte (up to 255,000 levels), so a deep value can sit in
//     any field of any corpus body. An accepted body is then copied, moved, assigned into
//     and written the way the gateway does (a debug log's copy, json_text_with for the
//     upstream body and /apply-template, dump_json for logs): the unbounded parse of the
//     past died here.
//   - cost: the work of an accepted body (messages, bytes handed to hashing and to the token
//     counter) must stay within a constant factor of the input bytes and the message bound,
//     and one run within a time proportional to its input.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/chat_request.h"
#include "gateway/request_limits.h"
#include "gateway/turn_request.h"
#include "rescue/relaxed_json.h"
#include "session/normalize.h"
#include "util/json.h"

namespace {

using nlohmann::json;
using namespace kvgate::gateway;
using namespace kvgate::rescue;
using namespace kvgate::session;

void check(bool ok) {
  if (!ok) std::abort();
}

const RequestLimits kLimits{.max_messages = 64, .context_tokens = 256, .max_token_bytes = 16};

// What the gateway does with an accepted body besides reading it: a copy with the messages
// assigned (the debug log), a move, the body written with other messages
// (json_text_with), and dumps.
void copy_like_the_gateway(const json& body) {
  json b = body;
  b["messages"] = body["messages"];
  json moved = std::move(b);
  check(moved.dump() == body.dump());
  check(kvgate::util::json_text_with(body, "messages", body["messages"]) == body.dump());
  check(!dump_json(moved).empty());
}

// The gateway's preprocessing of one body; returns the final body (null when refused).
json preprocess(std::string_view text, bool thinking_default) {
  auto raw = parse_json_body(text);
  if (!raw.ok()) return nullptr;
  check(json_depth_within(*raw, kMaxJsonDepth));
  auto prepared = prepare_chat(std::move(*raw), kLimits);
  if (!prepared.ok()) return nullptr;
  ChatRequest& req = prepared->request;
  check(req.body.is_object() && req.body["messages"].is_array() && !req.body["messages"].empty());
  check(validate_chat_body(req.body).ok());
  ThinkingOptions options;
  options.default_on = thinking_default;
  stabilise(req.body, options, StabiliserOptions{});
  // The steps keep the request valid for the engine-bound flow.
  check(validate_chat_body(req.body).ok());
  const auto chain = chain_hashes(req.body["messages"]);
  check(chain.size() == req.body["messages"].size());
  check(req.body["messages"].size() <= kLimits.max_messages);
  copy_like_the_gateway(req.body);
  return req.body;
}

// '@' → D × '[', '~' → D × ']' (D from the first byte); other bytes as they are.
std::string amplify(std::string_view in) {
  if (in.empty() || (in.find('@') == std::string_view::npos && in.find('~') == std::string_view::npos)) {
    return std::string(in);
  }
  const size_t depth = 1000 * static_cast<uint8_t>(in[0]);
  std::string out;
  for (char c : in.substr(1)) {
    if (c == '@') {
      out.append(depth, '[');
    } else if (c == '~') {
      out.append(depth, ']');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body = amplify(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::string_view text(body);
  const bool thinking = size % 2 == 1;
  const auto t0 = std::chrono::steady_clock::now();
  json a = preprocess(text, thinking);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // Linear work: generous for sanitizer builds (about 100 ns per byte natively).
  const double budget_ms = 200.0 + 0.05 * static_cast<double>(text.size());
  if (ms > budget_ms) {
    std::fprintf(stderr, "preprocessing %zu bytes took %.1f ms (budget %.1f ms)\n", text.size(), ms, budget_ms);
    std::abort();
  }
  // What reaches hashing and the token counter stays proportional to the input.
  if (a.is_object()) check(dump_json(a).size() <= 8 * text.size() + 4096);
  json b = preprocess(text, thinking);
  check(dump_json(a) == dump_json(b));
  // parse_chat_request (no repair) must agree with itself and never throw.
  (void)parse_chat_request(text);
  return 0;
}
