// Hostile request content against kvgate's Gateway and HttpServer in-process, in front of a
// fake engine that records what reached it: values nested 100,000 deep in fields kvgate
// does not read, invalid UTF-8 in content, role and path, numbers beyond double's range,
// max_tokens out of range, 100,000 messages, a 50 MB message, and prompts whose token count
// would take minutes. Each is answered with a 4xx naming the field or the bound, fast; the
// gateway lives on and serves a good request after each (docs/RELIABILITY.md, "Hostile
// request content").
#include <atomic>
#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "testing/eventually.h"
#include "testing/fault_support.h"
#include "testing/gateway_e2e.h"
#include "util/time.h"

namespace kvgate::gateway {

using http::HttpServerOptions;

namespace {

using nlohmann::json;
using testing::FakeConnection;
using testing::FakeEngine;
using testing::FakeRequest;
using testing::Front;
using testing::RawConnection;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using util::ms_since;

GatewayOptions fake_options() {
  GatewayOptions o;
  o.count_tokens = false;
  o.context_tokens = 4096;
  o.model_summaries = false;
  return o;
}

void answer_engine(const FakeRequest& r, FakeConnection& c) {
  if (!FakeEngine::answer_basics(r, c)) FakeEngine::answer_chat(r, c);
}

const std::string kGood = R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":4})";

struct Answer {
  int status = 0;
  json error;  // the "error" object, null if absent
  double ms = 0;
};

// POSTs the exact bytes `body` to `path`.
Answer post_bytes(Front& front, const std::string& path, const std::string& body) {
  auto client = front.client();
  client.set_read_timeout(120s);
  const auto t0 = Clock::now();
  auto res = client.Post(path.c_str(), body, "application/json");
  Answer a;
  a.ms = ms_since(t0);
  if (!res) return a;
  a.status = res->status;
  auto j = json::parse(res->body, nullptr, false);
  if (j.is_object() && j.contains("error")) a.error = j["error"];
  return a;
}

// A raw request; returns the status (0: no answer) and the answer's bytes.
std::pair<int, std::string> raw_request(uint16_t port, const std::string& bytes) {
  RawConnection c(port);
  if (!c.ok()) return {0, ""};
  c.send(bytes);
  const std::string answer = c.read_all(5s);
  if (answer.rfind("HTTP/1.1 ", 0) != 0) return {0, answer};
  return {std::atoi(answer.c_str() + 9), answer};
}

TEST(InputAbuseTest, DeepValuesInAnyFieldAre400sAndKvgateLives) {
  FakeEngine engine(answer_engine);
  Front front([&] { return engine.endpoint(); }, fake_options());
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  // The measured crash: ≈200 KB, 100,000 levels in `metadata`.
  const std::string chat = R"({"max_tokens":1,"messages":[{"role":"user","content":"hi"}],"metadata":)" + deep + "}";
  const std::string completion = R"({"max_tokens":1,"prompt":"hi","metadata":)" + deep + "}";
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/chat/completions", chat},
           {"/v1/completions", completion},
           {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",)"
                                    R"("function":{"name":"f","parameters":)" + deep + "}}]}"},
       }) {
    const Answer a = post_bytes(front, path, body);
    ASSERT_EQ(a.status, 400) << path << ": kvgate must answer (and live)";
    EXPECT_EQ(a.error.value("type", ""), "invalid_request_error");
    EXPECT_EQ(a.error.value("code", ""), "nesting_too_deep");
    EXPECT_NE(a.error.value("message", "").find("deeper than 512 levels"), std::string::npos) << a.error;
    EXPECT_LT(a.ms, 2000.0);
    EXPECT_EQ(post_bytes(front, "/v1/chat/completions", kGood).status, 200) << "kvgate lives on";
  }
  // Deep JSON inside a tool call's arguments string (parsed again for hashing).
  const json args_body = {
      {"messages",
       {{{"role", "user"}, {"content", "a"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls", {{{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{\"a\":" + deep + "}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "r"}},
        {{"role", "user"}, {"content", "b"}}}}};
  const Answer args = post_bytes(front, "/v1/chat/completions", args_body.dump());
  EXPECT_EQ(args.status, 400);
  EXPECT_EQ(args.error.value("param", ""), "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(engine.count("/v1/chat/completions"), 3u) << "only the good requests reached the engine";
  EXPECT_EQ(engine.count("/v1/completions"), 0u);
}

TEST(InputAbuseTest, MalformedBytesAndNumbersAre4xxNamingTheField) {
  FakeEngine engine(answer_engine);
  Front front([&] { return engine.endpoint(); }, fake_options());
  struct Case {
    std::string body;
    std::string param;
  };
  const std::string msg = R"({"messages":[{"role":"user","content":"hi"}],)";
  for (const Case& c : std::vector<Case>{
           {"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\xc3(\"}]}", "messages[0].content"},
           {"{\"messages\":[{\"role\":\"user\",\"content\":\"\xc0\x80\"}]}", "messages[0].content"},
           {"{\"messages\":[{\"role\":\"\xff\xfe\xc3(\",\"content\":\"hi\"}]}", "messages[0].role"},
           {msg + R"("temperature":1e999999})", "temperature"},
           {msg + R"("max_tokens":)" + std::string(400, '7') + "}", "max_tokens"},
           {msg + R"("max_tokens":18446744073709551615})", "max_tokens"},
           {msg + R"("max_completion_tokens":2147483648})", "max_completion_tokens"},
           {msg + R"("stream":"yes"})", "stream"},
       }) {
    const Answer a = post_bytes(front, "/v1/chat/completions", c.body);
    EXPECT_EQ(a.status, 400) << c.body.substr(0, 120) << " → " << a.error;
    EXPECT_EQ(a.error.value("param", ""), c.param) << a.error;
  }
  for (const std::string& body : {std::string(R"({"prompt":"hi","max_tokens":18446744073709551615})"),
                                  std::string(R"({"prompt":"hi","stream":"yes"})"),
                                  std::string(R"({"prompt":"hi","n_predict":1e999999})")}) {
    EXPECT_EQ(post_bytes(front, "/v1/completions", body).status, 400) << body;
  }
  // Invalid UTF-8 in the path (percent-encoded and raw): a 404 where no route takes the path, a
  // 400 naming the path where one does (it holds an id); never a 500.
  for (const char* target : {"/%ff", "/%c0%80", "/kvgate/v1/sessions/%ff", "/kvgate/v1/sessions/%ff/compact",
                             "/kvgate/v1/sessions/%ff/turns/1", "/kvgate/assets/%ff"}) {
    const std::string method = std::string_view(target).ends_with("/compact") ? "POST" : "GET";
    auto [status, answer] = raw_request(
        front.port(), fmt::format("{} {} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", method, target));
    EXPECT_EQ(status, std::string_view(target).starts_with("/kvgate/") ? 400 : 404) << target << ": " << answer.substr(0, 300);
  }
  EXPECT_EQ(engine.count("/v1/chat/completions"), 0u);
  EXPECT_EQ(engine.count("/v1/completions"), 0u);
  EXPECT_EQ(post_bytes(front, "/v1/chat/completions", kGood).status, 200);
}

TEST(InputAbuseTest, ManyOrHugeMessagesAreRefusedFast) {
  FakeEngine engine(answer_engine);
  GatewayOptions o = fake_options();
  o.max_token_bytes = 16;  // the test: no token longer than 16 bytes
  HttpServerOptions http;
  http.max_body_bytes = 64u << 20;
  Front front([&] { return engine.endpoint(); }, o, http);
  const uint64_t rss0 = testing::rss_kib(::getpid());
  // 100,000 one-word messages (≈3 MB).
  std::string many = R"({"max_tokens":1,"messages":[)";
  for (int i = 0; i < 100000; ++i) many += fmt::format(R"({}{{"role":"{}","content":"w{}"}})", i ? "," : "", i % 2 ? "assistant" : "user", i);
  many += "]}";
  const Answer a = post_bytes(front, "/v1/chat/completions", many);
  EXPECT_EQ(a.status, 413);
  EXPECT_EQ(a.error.value("code", ""), "too_many_messages");
  EXPECT_EQ(a.error.value("param", ""), "messages");
  EXPECT_LT(a.ms, 5000.0);
  // One 50 MB message: it cannot fit 4096 tokens of at most 16 bytes.
  const std::string huge =
      R"({"max_tokens":1,"messages":[{"role":"user","content":")" + std::string(50u << 20, 'a') + "\"}]}";
  const Answer b = post_bytes(front, "/v1/chat/completions", huge);
  EXPECT_EQ(b.status, 400);
  EXPECT_EQ(b.error.value("code", ""), "context_length_exceeded");
  EXPECT_EQ(b.error.value("param", ""), "messages[0].content");
  EXPECT_LT(b.ms, 5000.0);
  const uint64_t rss1 = testing::rss_kib(::getpid());
  std::printf("[figures] 100000 messages (%zu bytes): %d in %.0f ms; 50 MB message: %d in %.0f ms; RSS %llu -> %llu KiB\n",
              many.size(), a.status, a.ms, b.status, b.ms, static_cast<unsigned long long>(rss0),
              static_cast<unsigned long long>(rss1));
  EXPECT_EQ(engine.count("/v1/chat/completions"), 0u);
  EXPECT_EQ(post_bytes(front, "/v1/chat/completions", kGood).status, 200);
}

// An engine whose /tokenize takes 20 ms per call: counting 3,000 new messages would take a
// minute; the count's time limit turns it into a 413 within about a second, and another
// client is not held up behind it for longer than that.
TEST(InputAbuseTest, TokenCountingTimeIsBounded) {
  std::atomic<int> tokenize_calls{0};
  FakeEngine engine([&](const FakeRequest& r, FakeConnection& c) {
    if (FakeEngine::answer_basics(r, c)) return;
    if (r.path == "/apply-template") {
      const json b = json::parse(r.body, nullptr, false);
      std::string prompt;
      for (const auto& m : b["messages"]) prompt += "<|im_start|>" + m.value("content", "") + "<|im_end|>";
      return c.answer(200, "application/json", json{{"prompt", prompt}}.dump());
    }
    if (r.path == "/tokenize") {
      ++tokenize_calls;
      std::this_thread::sleep_for(20ms);
      const json b = json::parse(r.body, nullptr, false);
      // Special tokens are one token each and split the text; other text is 4 bytes a token.
      std::string text = b.value("content", "");
      json toks = json::array();
      for (size_t at; !text.empty(); text = text.substr(at)) {
        const size_t special = std::min(text.find("<|im_start|>"), text.find("<|im_end|>"));
        if (special == 0) {
          toks.push_back(1);
          at = text.find("|>") + 2;
          continue;
        }
        at = std::min(special, text.size());
        for (size_t i = 0; i < at; i += 4) toks.push_back(7);
      }
      return c.answer(200, "application/json", json{{"tokens", toks}}.dump());
    }
    FakeEngine::answer_chat(r, c);
  });
  GatewayOptions o = fake_options();
  o.count_tokens = true;
  o.always_count_tokens = true;
  o.count_time_limit = 1000ms;
  o.admission.max_active = 1;
  Front front([&] { return engine.endpoint(); }, o);
  json messages = json::array();
  for (int i = 0; i < 3000; ++i) messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", fmt::format("m{}", i)}});
  messages.push_back({{"role", "user"}, {"content", "last"}});
  std::atomic<double> other_ms{0};
  // The other client comes while the long request is being counted.
  std::jthread other([&] {
    testing::eventually([&] { return tokenize_calls.load() > 0; });
    other_ms = post_bytes(front, "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1})").ms;
  });
  const Answer a = post_bytes(front, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 1}}.dump());
  other.join();
  EXPECT_EQ(a.status, 413) << a.error;
  EXPECT_EQ(a.error.value("code", ""), "request_too_large");
  EXPECT_NE(a.error.value("message", "").find("--count-timeout"), std::string::npos) << a.error;
  EXPECT_LT(a.ms, 3000.0);
  EXPECT_LT(other_ms.load(), 4000.0) << "the other client waited behind the count";
  EXPECT_LT(tokenize_calls.load(), 200);
  std::printf("[figures] 3001 messages at 20 ms per /tokenize: %d in %.0f ms after %d calls; other client %.0f ms\n",
              a.status, a.ms, tokenize_calls.load(), other_ms.load());
}

}  // namespace
}  // namespace kvgate::gateway
