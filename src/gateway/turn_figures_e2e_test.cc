// A turn's figures (prompt, cached, computed, completion) are the engine's, and every place
// that reports them says the same: the client's usage, the request log, kvgate's /metrics and
// the session's record. The expected values are read from the engine's own counters
// (llama-server's /metrics), by the test, around the turn and just before a rescue's replay;
// for a plain turn and for turns whose output the engine's parser refused (rescued by a
// replay), whole and streamed. On the pinned mainline engine (ik does not count cache reuse).
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <regex>
#include <sstream>

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "http/sse.h"
#include "testing/eventually.h"
#include "testing/gateway_e2e.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;
using testing::Engine;
using testing::Front;

// The engine's counters, as the engine exports them.
struct Counts {
  uint64_t computed = 0, cached = 0, generated = 0;
  Counts operator-(const Counts& o) const {
    return {computed - o.computed, cached - o.cached, generated - o.generated};
  }
};

uint64_t metric(const std::string& text, const std::string& name) {
  const std::regex re("\n" + name + " ([0-9.eE+]+)");
  std::smatch m;
  if (!std::regex_search(text, m, re)) ADD_FAILURE() << "no " << name << " in\n" << text;
  return m.empty() ? 0 : static_cast<uint64_t>(std::stod(m[1].str()));
}

// The real upstream, with a hook run just before the rescue's replay (POST /completion).
class ReplayHook : public Upstream {
 public:
  explicit ReplayHook(EndpointProvider provider) : inner_(std::move(provider)) {}
  UpstreamResult<UpstreamResponse> call(const std::string& method, const std::string& path,
                                        const std::string& body, std::chrono::milliseconds timeout,
                                        CancelScope* cancel) override {
    return inner_.call(method, path, body, timeout, cancel);
  }
  UpstreamResult<int> stream(const std::string& path, const std::string& body, const StreamHandlers& handlers,
                             std::chrono::milliseconds idle_timeout, CancelScope* cancel) override {
    if (path == "/completion") {
      std::lock_guard lock(mu_);
      if (before_replay_) before_replay_();
    }
    return inner_.stream(path, body, handlers, idle_timeout, cancel);
  }
  EngineEndpoint endpoint() override { return inner_.endpoint(); }
  void before_replay(std::function<void()> f) {
    std::lock_guard lock(mu_);
    before_replay_ = std::move(f);
  }

 private:
  HttpUpstream inner_;
  std::mutex mu_;
  std::function<void()> before_replay_;
};

// This process's stderr (where kvgate writes its log lines) into a file while it lives. The
// request's log line comes after its answer (the answer's end is not held for the log), so
// the test waits for it.
class StderrTap {
 public:
  StderrTap() : path_(std::filesystem::temp_directory_path() / fmt::format("kvgate_tap_{}.log", ::getpid())) {
    std::fflush(stderr);
    fd_ = ::open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    saved_ = ::dup(2);
    ::dup2(fd_, 2);
  }
  ~StderrTap() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    ::close(fd_);
    std::filesystem::remove(path_);
  }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1, saved_ = -1;
};

// The request log line of `session` in `log`, if written.
json request_line(const std::string& log, const std::string& session) {
  for (size_t at = 0, end; (end = log.find('\n', at)) != std::string::npos; at = end + 1) {
    json line = json::parse(log.substr(at, end - at), nullptr, false);
    if (line.is_object() && line.value("event", "") == "request" && line.value("session", "") == session)
      return line;
  }
  return nullptr;
}

// The four figures as one place reports them.
struct Figures {
  uint64_t prompt = 0, cached = 0, computed = 0, completion = 0;
  bool operator==(const Figures&) const = default;
};
std::string show(const Figures& f) {
  return fmt::format("prompt {} cached {} computed {} completion {}", f.prompt, f.cached, f.computed,
                     f.completion);
}

class TurnFiguresE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = Engine::start({.context = 8192, .slots = 1}).release(); }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    hook_ = std::make_shared<ReplayHook>([] { return engine_->endpoint(); });
    front_ = std::make_unique<Front>(hook_, GatewayOptions{});
  }

  static httplib::Client direct() {
    httplib::Client c("127.0.0.1", engine_->endpoint().port);
    c.set_bearer_token_auth(engine_->api_key().c_str());
    c.set_read_timeout(std::chrono::seconds(60));
    return c;
  }
  static Counts engine_counts() {
    auto d = direct();
    auto res = d.Get("/metrics");
    if (!res || res->status != 200) {
      ADD_FAILURE() << "the engine's /metrics";
      return {};
    }
    const std::string text = "\n" + res->body;
    return {metric(text, "llamacpp:prompt_tokens_total"), metric(text, "llamacpp:prompt_tokens_cached_total"),
            metric(text, "llamacpp:tokens_predicted_total")};
  }
  Figures kvgate_metrics() {
    auto c = front_->client();
    const std::string text = "\n" + c.Get("/metrics")->body;
    return {metric(text, "kvgate_prompt_tokens_total"), metric(text, "kvgate_prompt_tokens_cached_total"),
            metric(text, "kvgate_prompt_tokens_prefilled_total"),
            metric(text, "kvgate_completion_tokens_total")};
  }
  uint64_t rescues() {
    auto c = front_->client();
    const std::string body = c.Get("/metrics")->body;
    uint64_t n = 0;
    for (const char* outcome : {"tool_calls", "content", "raw"}) {
      const std::string name = fmt::format("kvgate_rescues_total{{outcome=\"{}\"}} ", outcome);
      if (auto at = body.find(name); at != std::string::npos) n += std::stoull(body.substr(at + name.size()));
    }
    return n;
  }

  static json request(const std::string& topic, int seed, bool stream) {
    json tools = json::array(
        {{{"type", "function"},
          {"function",
           {{"name", "read_file"},
            {"description", "Read a file"},
            {"parameters", {{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}}}}}}});
    json body = {
        {"messages",
         json::array({{{"role", "system"}, {"content", topic + " You are an agent with tools."}},
                      {{"role", "user"}, {"content", "Read the file notes.md, say what it says."}}})},
        {"tools", tools},
        {"max_tokens", 24},
        {"seed", seed},
        {"stream", stream}};
    if (stream) body["stream_options"] = {{"include_usage", true}};
    return body;
  }

  // One turn through kvgate; what each place reported, and the engine's counters around it.
  struct Turn {
    Figures client, log, metrics, session;
    Counts engine_before, engine_at_replay, engine_after;
    bool rescued = false;
    std::string finish;
    std::string raw;
  };
  Turn run(const std::string& session, const json& body) {
    Turn t;
    const Figures m0 = kvgate_metrics();
    const uint64_t rescues0 = rescues();
    hook_->before_replay([&t] { t.engine_at_replay = engine_counts(); });
    t.engine_before = engine_counts();
    auto c = front_->client();
    c.set_read_timeout(std::chrono::seconds(120));
    StderrTap tap;
    auto res = c.Post("/v1/chat/completions", {{"X-Session-Id", session}}, body.dump(), "application/json");
    t.engine_after = engine_counts();
    hook_->before_replay(nullptr);
    if (!res || res->status != 200) {
      ADD_FAILURE() << (res ? res->body : std::string("no answer"));
      return t;
    }
    t.raw = res->body;
    t.rescued = rescues() > rescues0;
    json usage;
    if (body.value("stream", false)) {
      for (const auto& ev : http::SseParser().feed(res->body)) {
        if (ev.comment_only || ev.is_done()) continue;
        json j = json::parse(ev.data);
        if (j.contains("usage") && j["usage"].is_object()) usage = j["usage"];
        for (const auto& ch : j.value("choices", json::array())) {
          if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) t.finish = ch["finish_reason"];
        }
      }
    } else {
      json j = json::parse(res->body);
      usage = j["usage"];
      t.finish = j["choices"][0]["finish_reason"];
    }
    if (!usage.is_object()) {
      ADD_FAILURE() << "no usage: " << res->body;
      return t;
    }
    t.client = {usage.value("prompt_tokens", uint64_t{0}),
                usage.contains("prompt_tokens_details")
                    ? usage["prompt_tokens_details"].value("cached_tokens", uint64_t{0})
                    : uint64_t{999999},
                0, usage.value("completion_tokens", uint64_t{0})};
    // The session kvgate made of the client's name (scoped), as it lists it.
    std::string id;
    const std::string listed = c.Get("/kvgate/v1/sessions")->body;
    const json sessions = json::parse(listed);
    for (const auto& listed_session : sessions["data"]) {
      const std::string sid = listed_session.value("id", "");
      if (sid == session || sid.ends_with("~" + session)) id = sid;
    }
    EXPECT_FALSE(id.empty()) << "no session " << session << " in " << listed.substr(0, 3000);
    json line;
    EXPECT_TRUE(testing::eventually([&] { return !(line = request_line(tap.text(), id)).is_null(); }))
        << "no request log line for " << id;
    if (line.is_object()) {
      t.log = {line["prompt_tokens"], line["cached_tokens"], line["prefilled_tokens"],
               line["completion_tokens"]};
    }
    const Figures m1 = kvgate_metrics();
    t.metrics = {m1.prompt - m0.prompt, m1.cached - m0.cached, m1.computed - m0.computed,
                 m1.completion - m0.completion};
    auto s = c.Get("/kvgate/v1/sessions/" + id);
    EXPECT_TRUE(s && s->status == 200) << id;
    if (s && s->status == 200) {
      const json turn = json::parse(s->body)["turns"].back();
      t.session = {turn["prompt_tokens"], turn["cached_tokens"], turn["prefilled_tokens"], 0};
    }
    return t;
  }

  // What the engine's counters say the turn's figures are: the prompt as the attempt that did
  // the work found it (for a rescued turn, the refused attempt: before the replay), all the
  // prompt tokens the engine computed for the turn (the replay's too), and the generated
  // tokens of the attempt whose text the client got (`replay_text`).
  static Figures engine_figures(const Turn& t, bool replay_text) {
    const Counts first = (t.rescued ? t.engine_at_replay : t.engine_after) - t.engine_before;
    const Counts replay = t.engine_after - t.engine_at_replay;
    const Counts all = t.engine_after - t.engine_before;
    return {first.computed + first.cached, first.cached, all.computed,
            t.rescued && replay_text ? replay.generated : first.generated};
  }

  static void expect_places_agree(const Turn& t, const Figures& engine, const std::string& what) {
    SCOPED_TRACE(what + " (engine: " + show(engine) + ")");
    EXPECT_EQ(t.client.prompt, engine.prompt) << show(t.client);
    EXPECT_EQ(t.client.cached, engine.cached) << show(t.client);
    EXPECT_EQ(t.client.completion, engine.completion) << show(t.client);
    EXPECT_EQ(t.log, engine) << "log: " << show(t.log);
    EXPECT_EQ(t.metrics, engine) << "metrics: " << show(t.metrics);
    EXPECT_EQ(t.session, (Figures{engine.prompt, engine.cached, engine.computed, 0}))
        << "session: " << show(t.session);
  }

  static Engine* engine_;
  std::shared_ptr<ReplayHook> hook_;
  std::unique_ptr<Front> front_;
};
Engine* TurnFiguresE2eTest::engine_ = nullptr;

// A plain turn (no refusal): every place says what the engine counted.
TEST_F(TurnFiguresE2eTest, APlainTurnReportsTheEnginesFigures) {
  json body = testing::plain_chat(
      json::array({{{"role", "user"}, {"content", "A plain question about lighthouses."}}}));
  const Turn t = run("figures-plain", body);
  ASSERT_FALSE(t.rescued);
  expect_places_agree(t, engine_figures(t, false), "plain turn");
  EXPECT_GT(t.client.prompt - t.client.cached, 0u);
  // The model is named by the id /v1/models lists, not by the engine's path of its file.
  auto c = front_->client();
  const json models = json::parse(c.Get("/v1/models")->body);
  EXPECT_EQ(json::parse(t.raw)["model"], models["data"][0]["id"]) << t.raw;
  body["stream"] = true;
  auto streamed = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(streamed && streamed->status == 200);
  for (const auto& ev : http::SseParser().feed(streamed->body)) {
    if (ev.comment_only || ev.is_done()) continue;
    EXPECT_EQ(json::parse(ev.data)["model"], models["data"][0]["id"]) << ev.data;
  }
}

// A raw completion (/v1/completions), whole and streamed, names the model as chat does: the id
// /v1/models lists, or the one the client asked for (the engine says its file's path).
TEST_F(TurnFiguresE2eTest, RawCompletionsNameTheModelByItsId) {
  auto c = front_->client();
  const json models = json::parse(c.Get("/v1/models")->body);
  const json listed = models["data"][0]["id"];
  json body = {{"prompt", "Lighthouses are"}, {"max_tokens", 3}, {"temperature", 0}};
  auto whole = testing::post_json(c, "/v1/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  EXPECT_EQ(whole.body["model"], listed) << whole.raw;
  body["model"] = "my-own-name";
  body["stream"] = true;
  auto streamed = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(streamed && streamed->status == 200);
  int chunks = 0;
  for (const auto& ev : http::SseParser().feed(streamed->body)) {
    if (ev.comment_only || ev.is_done()) continue;
    ++chunks;
    EXPECT_EQ(json::parse(ev.data)["model"], "my-own-name") << ev.data;
  }
  EXPECT_GT(chunks, 0) << streamed->body;
}

// A request that sets no output limit is given the default one: it ends as "length" once the
// engine generated that many tokens (by the engine's count), on chat completions and on
// Responses (status "incomplete"), and its model is the listed id.
TEST_F(TurnFiguresE2eTest, AnUncappedRequestEndsAtTheDefaultCap) {
  GatewayOptions options;
  options.default_max_tokens = 5;
  Front capped(hook_, options);
  auto c = capped.client();
  json body =
      testing::plain_chat(json::array({{{"role", "user"}, {"content", "An uncapped question on tides."}}}));
  body.erase("max_tokens");
  const Counts before = engine_counts();
  auto a = testing::post_json(c, "/v1/chat/completions", body);
  const Counts grown = engine_counts() - before;
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["choices"][0]["finish_reason"], "length") << a.raw;
  EXPECT_EQ(grown.generated, 5u);
  EXPECT_EQ(a.body["usage"]["completion_tokens"], grown.generated);
  auto r = testing::post_json(c, "/v1/responses", {{"input", "An uncapped question on rivers."}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"], "incomplete") << r.raw;
  EXPECT_EQ(r.body["incomplete_details"]["reason"], "max_output_tokens") << r.raw;
  EXPECT_EQ(r.body["model"], "kvgate") << r.raw;  // GatewayOptions' model name, as /v1/models lists it
}

// Whole answers the engine's parser refused, on a prompt new to the engine's cache: the
// refused attempt computed it, the replay read it back from the cache. The client is told
// the refused attempt's cache (not the replay's, nearly all of the prompt), and the figures
// everywhere count the replay's prefill as computed work.
TEST_F(TurnFiguresE2eTest, ARescuedWholeAnswerReportsTheWorkOfTheRefusedAttempt) {
  int found = 0;
  for (int seed = 1; seed <= 12 && found < 2; ++seed) {
    const Turn t = run(fmt::format("figures-whole-{}", seed),
                       request(fmt::format("Topic {}.", seed * 7919), seed, false));
    if (!t.rescued) continue;
    ++found;
    const Figures engine = engine_figures(t, true);
    std::printf("whole, seed %d: client %s; engine %s\n", seed, show(t.client).c_str(), show(engine).c_str());
    expect_places_agree(t, engine, fmt::format("seed {}", seed));
    EXPECT_LT(t.client.cached * 2, t.client.prompt) << "a cold prompt reported as cached: " << show(t.client);
    EXPECT_GT(engine.computed, engine.prompt - engine.cached)
        << "the replay's prefill is in the computed tokens";
  }
  EXPECT_GT(found, 0) << "the engine refused none of 12 outputs: the test shows nothing";
}

// Streams whose end the engine refused: the final usage chunk carries the cached tokens, the
// same figures as every other place, and a finish that describes what was delivered.
TEST_F(TurnFiguresE2eTest, ARescuedStreamReportsWhatWasDelivered) {
  int found = 0;
  for (int seed = 1; seed <= 16 && found < 2; ++seed) {
    const Turn t = run(fmt::format("figures-stream-{}", seed),
                       request(fmt::format("Theme {}.", seed * 104729), seed, true));
    if (!t.rescued) continue;
    ++found;
    SCOPED_TRACE(fmt::format("seed {}", seed));
    EXPECT_NE(t.client.cached, 999999u) << "no prompt_tokens_details in the final usage";
    const Figures replayed = engine_figures(t, true);
    const Figures refused = engine_figures(t, false);
    // Which attempt's text the client got decides the completion (the replay's when its text
    // continued what was streamed); either way it is one the engine counted.
    const bool replay_text = t.client.completion == replayed.completion;
    std::printf(
        "stream, seed %d: client %s, finish %s; engine %s (refused attempt's text: completion %llu)\n", seed,
        show(t.client).c_str(), t.finish.c_str(), show(replayed).c_str(),
        static_cast<unsigned long long>(refused.completion));
    expect_places_agree(t, replay_text ? replayed : refused,
                        replay_text ? "replay's text" : "refused attempt's text");
    if (t.client.completion >= 24) {
      EXPECT_TRUE(t.finish == "length" || t.finish == "tool_calls") << t.finish;
    }
    EXPECT_EQ(t.raw.find("\"model\":\"/"), std::string::npos) << "a file path as the model";
  }
  EXPECT_GT(found, 0) << "the engine refused none of 16 streamed outputs: the test shows nothing";
}

}  // namespace
}  // namespace kvgate::gateway
