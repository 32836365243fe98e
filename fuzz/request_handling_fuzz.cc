// libFuzzer target: arbitrary bytes in any header value or JSON field value of a request,
// through the whole request handling of a Gateway (in front of a scripted engine,
// testing/scripted_upstream.h, which also saves and restores slot states): the head check
// (ids, Host, content type), the body's parsing, the ids, session intake and recognition, the
// turn, the session store (SQLite), the engine state saved with its record when the next
// conversation takes the slot, the log lines and the JSON of what the status, session
// listing and a session's state show. No exception may reach handle()'s
// last resort (it answers 500 "internal error"), and a plain request afterwards is answered
// 200 — as the invalid-UTF-8 X-Session-Id, which once made every later status page a 500,
// would have shown.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include "gateway/gateway.h"
#include "http/http_server.h"
#include "testing/scripted_upstream.h"
#include "util/json.h"

namespace {

using nlohmann::json;
using namespace kvgate;

void check(bool ok) {
  if (!ok) std::abort();
}

class Recorder final : public http::ResponseWriter {
 public:
  Recorder() : http::ResponseWriter(-1, false) {}
  bool send(int status, const http::HeaderList&, std::string_view) override {
    status_ = status;
    return true;
  }
  bool begin_stream(int status, const http::HeaderList&) override {
    status_ = status;
    return true;
  }
  bool write(std::string_view) override { return true; }
  bool end() override { return true; }
  bool client_gone() override { return false; }
  bool answered() const override { return status_ != 0; }
  int status() const override { return status_; }

 private:
  int status_ = 0;
};

// A JSON string literal of `bytes` as a careless client writes it: quotes, backslashes and
// control characters escaped, every other byte (invalid UTF-8 included) as it is.
std::string literal(std::string_view bytes) {
  std::string out = "\"";
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The body of `route` with the fuzzed value at one field (its text put in by hand, so that
// bytes no JSON library would write reach the gateway).
std::string body_for(int route, size_t field, const std::string& value) {
  static const char* kChatFields[] = {
      "model",      "user", "prompt_cache_key",     "messages.content", "messages.role", "messages.name",
      "tools.name", "stop", "response_format.type", "grammar"};
  static const char* kMessagesFields[] = {"model", "metadata.user_id", "messages.content", "system",
                                          "tools.name"};
  static const char* kResponsesFields[] = {
      "model", "input", "instructions", "previous_response_id", "prompt_cache_key", "user"};
  const std::string v = literal(value);
  const std::string mark = "\"@V@\"";
  std::string body;
  std::string key;
  if (route == 0) {
    key = kChatFields[field % std::size(kChatFields)];
    json b = {{"model", "m"},
              {"max_tokens", 4},
              {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
    if (key == "messages.content")
      b["messages"][0]["content"] = "@V@";
    else if (key == "messages.role")
      b["messages"][0]["role"] = "@V@";
    else if (key == "messages.name")
      b["messages"][0]["name"] = "@V@";
    else if (key == "tools.name")
      b["tools"] = json::array({{{"type", "function"}, {"function", {{"name", "@V@"}}}}});
    else if (key == "response_format.type")
      b["response_format"] = {{"type", "@V@"}};
    else
      b[key] = "@V@";
    body = b.dump();
  } else if (route == 1) {
    key = kMessagesFields[field % std::size(kMessagesFields)];
    json b = {{"model", "m"},
              {"max_tokens", 4},
              {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
    if (key == "metadata.user_id")
      b["metadata"] = {{"user_id", "@V@"}};
    else if (key == "messages.content")
      b["messages"][0]["content"] = "@V@";
    else if (key == "tools.name")
      b["tools"] = json::array({{{"name", "@V@"}, {"input_schema", {{"type", "object"}}}}});
    else
      b[key] = "@V@";
    body = b.dump();
  } else {
    key = kResponsesFields[field % std::size(kResponsesFields)];
    json b = {{"model", "m"}, {"input", "hi"}, {"max_output_tokens", 4}};
    b[key] = "@V@";
    body = b.dump();
  }
  const size_t at = body.find(mark);
  if (at != std::string::npos) body.replace(at, mark.size(), v);
  return body;
}

http::HttpRequest request(std::string method, std::string path, std::string body) {
  http::HttpRequest r;
  r.method = std::move(method);
  r.target = path;
  r.path = std::move(path);
  r.body = std::move(body);
  r.remote = "127.0.0.1:1";
  r.headers = {{"host", "127.0.0.1"}, {"content-type", "application/json"}};
  return r;
}

int handled(gateway::Gateway& g, const http::HttpRequest& r) {
  const gateway::HeadVerdict v = g.check_head(r);
  if (v.status != 0) return v.status;
  Recorder w;
  g.handle(r, w);
  return w.status();
}

// One gateway for the whole run, as kvgate up has it: sessions kept in SQLite, engine states
// saved and restored (in a fresh folder), one slot, so each request takes the slot from the
// previous conversation and that one's state is saved with its record.
gateway::Gateway& the_gateway() {
  static auto upstream = std::make_shared<testing::ScriptedUpstream>();
  static auto* g = [] {
    char tmpl[] = "/tmp/kvgate-request-fuzz.XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    check(dir != nullptr);
    const std::filesystem::path root(dir);
    std::filesystem::create_directories(root / "kv");
    upstream->keep_slot_states_in(root / "kv");
    gateway::GatewayOptions o;
    o.context_tokens = 100000;
    o.model_summaries = false;
    o.max_sessions = 16;
    o.kv.dir = root / "kv";
    o.kv.disk_budget_bytes = 64u << 20;
    o.kv.save_every_tokens = 1;
    o.kv.min_growth_tokens = 1;
    auto* gw = new gateway::Gateway(std::move(o), upstream);
    check(gw->open_store(root / "sessions.db").ok());
    check(gw->open_kv_states().ok());
    return gw;
  }();
  return *g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  gateway::Gateway& g = the_gateway();
  static const char* kPaths[] = {"/v1/chat/completions", "/v1/messages", "/v1/responses"};
  static const char* kHeaders[] = {"x-session-id", "authorization",     "content-type", "origin",
                                   "host",         "anthropic-version", "x-api-key",    "user-agent"};
  const int route = in.ConsumeIntegralInRange<int>(0, 2);
  const size_t field = in.ConsumeIntegral<uint8_t>();
  const bool in_header = in.ConsumeBool();
  const std::string header = kHeaders[in.ConsumeIntegralInRange<size_t>(0, std::size(kHeaders) - 1)];
  // Half the values have their control bytes moved to 0x80-0x9F: random bytes nearly always
  // hold a control character, which the head check refuses at once, so without this the
  // bytes ≥ 0x80 that are not UTF-8 (the X-Session-Id that once broke every later request)
  // would seldom get past it.
  const bool high = in.ConsumeBool();
  std::string value = in.ConsumeRemainingBytesAsString();
  if (high) {
    for (char& c : value) {
      if (static_cast<unsigned char>(c) < 0x20) c = static_cast<char>(static_cast<unsigned char>(c) | 0x80);
    }
  }

  http::HttpRequest r = request("POST", kPaths[route], body_for(route, field, in_header ? "hello" : value));
  if (in_header) {
    bool replaced = false;
    for (auto& [name, v] : r.headers) {
      if (name == header) {
        v = value;
        replaced = true;
      }
    }
    if (!replaced) r.headers.emplace_back(header, value);
  }
  check(handled(g, r) != 500);
  // What is shown and kept of every session: the status, the listing, each session's JSON.
  check(handled(g, request("GET", "/kvgate/v1/status", "")) == 200);
  check(handled(g, request("GET", "/kvgate/v1/sessions", "")) == 200);
  for (const auto& s : g.sessions().list(gateway::Session::kOpenScope)) {
    check(!util::json_text(s->conversation.to_json()).empty());
  }
  // The next client is served.
  http::HttpRequest next =
      request("POST", "/v1/chat/completions",
              R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"next"}]})");
  next.headers.emplace_back("x-session-id", "next-client");
  check(handled(g, next) == 200);
  return 0;
}
