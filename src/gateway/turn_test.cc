// Whole chat turns without HTTP: the real Gateway (sessions, accounting, compaction, retries,
// rescue, commit) in front of a scripted engine (testing/scripted_upstream.h), its output
// recorded by a TurnOutput. What an adapter receives, and what the engine was asked, are
// judged.
#include "gateway/turn.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gateway/gateway.h"
#include "testing/scripted_upstream.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;
using testing::ScriptedAnswer;
using testing::ScriptedUpstream;

// Every call a turn makes on its output, in order.
class RecordingOutput : public TurnOutput {
 public:
  struct Event {
    std::string kind;  // "open", "begin", "engine", "engine_error", "kvgate", "end", "answer", "fail"
    json chunk;        // the chunk, the answer, or the error's JSON
    std::string raw;   // the engine's text, when it came with one
    bool complete = false;  // "end": complete
    int status = 0;         // "fail": the status
  };
  std::vector<Event> events;
  std::vector<std::string> progress_notes;

  bool client_gone() override { return false; }
  void open_stream(CancelScope&) override { events.push_back({.kind = "open"}); }
  bool begin_stream() override {
    events.push_back({.kind = "begin"});
    return true;
  }
  bool engine_chunk(const json& chunk, const std::string& raw) override {
    events.push_back({.kind = "engine", .chunk = chunk, .raw = raw});
    return true;
  }
  bool engine_error(const ApiError& error, const std::string& raw) override {
    events.push_back({.kind = "engine_error", .chunk = error.to_json(), .raw = raw, .status = error.status});
    return true;
  }
  bool kvgate_chunk(const json& chunk) override {
    events.push_back({.kind = "kvgate", .chunk = chunk});
    return true;
  }
  void progress(std::string text) override { progress_notes.push_back(std::move(text)); }
  void end_stream(bool complete) override { events.push_back({.kind = "end", .complete = complete}); }
  void answer(const json& response, std::string_view engine_text) override {
    events.push_back({.kind = "answer", .chunk = response, .raw = std::string(engine_text)});
  }
  void fail(const ApiError& error) override {
    events.push_back({.kind = "fail", .chunk = error.to_json(), .status = error.status});
  }

  std::vector<Event> of(const std::string& kind) const {
    std::vector<Event> out;
    for (const auto& e : events) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  // The text the chunks (engine's and kvgate's) carried as content.
  std::string streamed_content() const {
    std::string out;
    for (const auto& e : events) {
      if (e.kind != "engine" && e.kind != "kvgate") continue;
      for (const auto& c : e.chunk.value("choices", json::array())) {
        const json d = c.value("delta", json::object());
        if (d.contains("content") && d["content"].is_string()) out += d["content"].get<std::string>();
      }
    }
    return out;
  }
};

struct Fixture {
  explicit Fixture(GatewayOptions options = {}) : upstream(std::make_shared<ScriptedUpstream>()) {
    options.context_tokens = options.context_tokens.value_or(100000);
    options.model_summaries = false;  // extractive summaries: no engine call to script
    gateway = std::make_unique<Gateway>(std::move(options), upstream);
  }

  RecordingOutput turn(json body, bool stream = false, bool include_usage = false) {
    RecordingOutput out;
    if (stream) body["stream"] = true;
    gateway->run_turn({.body = std::move(body), .scope = "open", .stream = stream, .include_usage = include_usage},
                      out);
    return out;
  }
  std::vector<json> chat_bodies() const { return upstream->bodies("/v1/chat/completions"); }
  std::shared_ptr<Session> only_session() {
    auto all = gateway->sessions().list("open");
    EXPECT_EQ(all.size(), 1u);
    return all.empty() ? nullptr : all.front();
  }

  std::shared_ptr<ScriptedUpstream> upstream;
  std::unique_ptr<Gateway> gateway;
};

json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }
json assistant(const std::string& text) { return {{"role", "assistant"}, {"content", text}}; }

// A history of `turns` exchanges of `bytes`-byte messages, ending with a user message.
json long_history(int turns, size_t bytes) {
  json m = json::array({{{"role", "system"}, {"content", "You are terse."}}});
  for (int i = 0; i < turns; ++i) {
    m.push_back(user(fmt::format("question {} ", i) + std::string(bytes, 'q')));
    m.push_back(assistant(fmt::format("answer {} ", i) + std::string(bytes, 'a')));
  }
  m.push_back(user("and now?"));
  return m;
}

std::string answer_content(const RecordingOutput& out) {
  auto answers = out.of("answer");
  if (answers.size() != 1) return "<" + std::to_string(answers.size()) + " answers>";
  return answers[0].chunk["choices"][0]["message"].value("content", "");
}

TEST(TurnTest, APlainTurnIsSentWithItsSlotAndSeedAndAnsweredAsTheEngineWroteIt) {
  Fixture f;
  // The client asks for the model by the name the engine answers with ("fake").
  auto out = f.turn({{"model", "fake"}, {"messages", json::array({user("hello")})}, {"max_tokens", 16}});
  ASSERT_EQ(out.events.size(), 1u);
  ASSERT_EQ(out.events[0].kind, "answer") << out.events[0].chunk.dump();
  EXPECT_EQ(answer_content(out), "reply 1");
  // Unchanged by kvgate: the engine's own text goes to the client.
  EXPECT_EQ(json::parse(out.events[0].raw), out.events[0].chunk);
  // Otherwise the answer names the model as /v1/models lists it, not as the engine does.
  auto renamed = f.turn({{"messages", json::array({user("hello"), assistant("reply 1"), user("again")})}});
  ASSERT_EQ(renamed.events.size(), 1u);
  EXPECT_EQ(renamed.events[0].chunk["model"], "kvgate");
  EXPECT_TRUE(renamed.events[0].raw.empty());
  const auto bodies = f.chat_bodies();
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(bodies[0]["messages"], json::array({user("hello")}));
  EXPECT_EQ(bodies[0]["id_slot"], 0);
  EXPECT_EQ(bodies[0]["cache_prompt"], true);
  EXPECT_TRUE(bodies[0]["seed"].is_number_integer());
  EXPECT_EQ(bodies[0]["chat_template_kwargs"]["enable_thinking"], false);  // the thinking policy's default
  auto s = f.only_session();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->counters.requests, 2u);
  EXPECT_EQ(s->counters.errors, 0u);
}

TEST(TurnTest, ASecondTurnContinuesTheSessionAndExtendsWhatTheEngineWasSent) {
  Fixture f;
  (void)f.turn({{"messages", json::array({user("hello")})}});
  auto out = f.turn({{"messages", json::array({user("hello"), assistant("reply 1"), user("more")})}});
  EXPECT_EQ(answer_content(out), "reply 2");
  const auto bodies = f.chat_bodies();
  ASSERT_EQ(bodies.size(), 2u);
  const json& first = bodies[0]["messages"];
  const json& second = bodies[1]["messages"];
  ASSERT_EQ(second.size(), 3u);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(second[i], first[i]) << i;
  EXPECT_EQ(second[1]["content"], "reply 1");
  auto s = f.only_session();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->counters.requests, 2u);
  // The engine reused the first prompt and its reply: the second turn's record says so, and
  // no prefix break was noted.
  const auto* last = s->turns.last();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->recognised_by, "prefix");
  EXPECT_GT(last->cached_tokens, 0u);
  EXPECT_FALSE(last->prefix_break);
}

TEST(TurnTest, TheConversationFieldCarriesAStableIdPerConversationThatRevealsNothingOfIt) {
  Fixture f(GatewayOptions{.conversation_field = "user"});
  (void)f.turn({{"messages", json::array({user("hello")})}});
  (void)f.turn({{"messages", json::array({user("hello"), assistant("reply 1"), user("more")})}});
  (void)f.turn({{"messages", json::array({user("another conversation")})}, {"user", "alice"}});
  const auto bodies = f.chat_bodies();
  ASSERT_EQ(bodies.size(), 3u);
  ASSERT_TRUE(bodies[0]["user"].is_string()) << bodies[0].dump();
  EXPECT_EQ(bodies[0]["user"], bodies[1]["user"]);
  EXPECT_NE(bodies[0]["user"], bodies[2]["user"]);
  const std::string id = bodies[2]["user"];
  EXPECT_TRUE(id.starts_with("kvg-")) << id;
  EXPECT_EQ(id.find("alice"), std::string::npos);
  EXPECT_FALSE(ConversationTag::current());  // the turn's tag ended with it
}

TEST(TurnTest, PastTheHighWatermarkTheConversationIsCompactedBeforeItIsSent) {
  GatewayOptions o;
  o.context_tokens = 8000;
  o.high_watermark_tokens = 3000;
  o.reply_reserve_tokens = 100;
  Fixture f(o);
  const json history = long_history(12, 300);  // about 8,000 tokens of the fake tokenizer
  auto out = f.turn({{"messages", history}});
  EXPECT_EQ(answer_content(out), "reply 1");
  const auto bodies = f.chat_bodies();
  ASSERT_EQ(bodies.size(), 1u);
  const json& sent = bodies[0]["messages"];
  EXPECT_LT(sent.size(), history.size());
  EXPECT_EQ(sent.front(), history.front());  // the system message stays
  EXPECT_EQ(sent.back(), history.back());    // and the newest user message
  EXPECT_LE(ScriptedUpstream::tokens(ScriptedUpstream::render(sent)), 3000u);
  auto s = f.only_session();
  ASSERT_TRUE(s);
  ASSERT_EQ(s->compactions.size(), 1u);
  EXPECT_EQ(s->compactions[0]["trigger"], "watermark");
}

TEST(TurnTest, AnOverflowAnswerIsCompactedHarderAndSentAgain) {
  Fixture f;  // a context of 100,000 tokens: no watermark compaction
  f.upstream->push(ScriptedAnswer::overflow(16000, 4096));
  const json history = long_history(12, 300);
  auto out = f.turn({{"messages", history}});
  for (const auto& e : out.of("fail")) ADD_FAILURE() << e.chunk.dump();
  EXPECT_EQ(answer_content(out), "reply 2");
  const auto bodies = f.chat_bodies();
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(bodies[0]["messages"].size(), history.size());
  EXPECT_LT(bodies[1]["messages"].size(), history.size());
  // The engine's context (4096) less the watermarks and the reply's room is the target.
  EXPECT_LE(ScriptedUpstream::tokens(ScriptedUpstream::render(bodies[1]["messages"])), 4096u);
  auto s = f.only_session();
  ASSERT_TRUE(s);
  ASSERT_EQ(s->compactions.size(), 1u);
  EXPECT_EQ(s->compactions[0]["trigger"], "overflow");
  EXPECT_NE(f.gateway->metrics().prometheus().find("overflow_retries_total 1"), std::string::npos);
}

TEST(TurnTest, AnOverflowThatCompactionCannotFixIsAContextError) {
  GatewayOptions o;
  o.max_overflow_retries = 1;
  Fixture f(o);
  f.upstream->push(ScriptedAnswer::overflow(900, 10));
  f.upstream->push(ScriptedAnswer::overflow(900, 10));
  auto out = f.turn({{"messages", json::array({user("hello")})}});
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].kind, "fail");
  EXPECT_EQ(out.events[0].status, 400);
  EXPECT_EQ(out.events[0].chunk["error"]["code"], "context_length_exceeded");
}

const json kReadTool = json::array(
    {{{"type", "function"},
      {"function",
       {{"name", "read"},
        {"parameters", {{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}}}}}}});

TEST(TurnTest, OutputTheEngineCannotParseIsRescuedFromAReplay) {
  Fixture f;
  f.upstream->push(ScriptedAnswer::output_parse_error());
  f.upstream->set_replay_text("<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>");
  auto out = f.turn({{"messages", json::array({user("read a.txt")})}, {"tools", kReadTool}});
  auto answers = out.of("answer");
  ASSERT_EQ(answers.size(), 1u);
  for (const auto& e : out.of("fail")) ADD_FAILURE() << e.chunk.dump();
  const json& choice = answers[0].chunk["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "read");
  EXPECT_EQ(json::parse(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"path", "a.txt"}}));
  EXPECT_EQ(answers[0].chunk["kvgate"]["rescued"], true);
  EXPECT_TRUE(answers[0].raw.empty());  // kvgate's own answer: written anew
  // The replay continues the prompt the engine rendered for the request.
  const auto replays = f.upstream->calls("/completion");
  ASSERT_EQ(replays.size(), 1u);
  EXPECT_EQ(replays[0].body["prompt"], ScriptedUpstream::render(json::array({user("read a.txt")})));
  EXPECT_EQ(replays[0].body["seed"], f.chat_bodies()[0]["seed"]);
}

TEST(TurnTest, AStreamedRescueReplacesTheHeldToolCallsWithKvgatesChunks) {
  Fixture f;
  f.upstream->push(ScriptedAnswer::output_parse_error("Let me look."));
  f.upstream->set_replay_text(
      "Let me look.<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"b.txt\"}}\n</tool_call>");
  auto out = f.turn({{"messages", json::array({user("read b.txt")})}, {"tools", kReadTool}}, true);
  ASSERT_FALSE(out.events.empty());
  EXPECT_EQ(out.events.front().kind, "open");
  EXPECT_EQ(out.of("fail").size(), 0u);
  EXPECT_EQ(out.of("engine_error").size(), 0u);  // the engine's parse error never reaches the client
  const auto ours = out.of("kvgate");
  ASSERT_FALSE(ours.empty());
  bool saw_call = false;
  for (const auto& e : ours) {
    const json& d = e.chunk["choices"][0]["delta"];
    if (d.contains("tool_calls")) saw_call = d["tool_calls"][0]["function"]["name"] == "read";
  }
  EXPECT_TRUE(saw_call);
  EXPECT_EQ(ours.back().chunk["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(out.streamed_content(), "Let me look.");
  ASSERT_EQ(out.events.back().kind, "end");
  EXPECT_TRUE(out.events.back().complete);
}

// A server that cannot render the request (no /apply-template) cannot replay it: the client
// still gets an answer, what text it already has, marked raw, never the engine's 500.
TEST(TurnTest, OutputThatCannotBeReplayedIsAnsweredRawNotWithA500) {
  Fixture f;
  f.upstream->set_renders(false);
  f.upstream->push(ScriptedAnswer::output_parse_error());
  auto whole = f.turn({{"messages", json::array({user("read a.txt")})}, {"tools", kReadTool}});
  for (const auto& e : whole.of("fail")) ADD_FAILURE() << e.chunk.dump();
  auto answers = whole.of("answer");
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].chunk["kvgate"]["raw"], true);
  EXPECT_EQ(answers[0].chunk["choices"][0]["message"]["content"], "");
  EXPECT_FALSE(answers[0].chunk.contains("usage"));  // nothing replayed: the engine's counts are not known

  f.upstream->push(ScriptedAnswer::output_parse_error("Let me look."));
  auto streamed = f.turn({{"messages", json::array({user("read b.txt")})}, {"tools", kReadTool}}, true);
  EXPECT_EQ(streamed.of("fail").size(), 0u);
  EXPECT_EQ(streamed.of("engine_error").size(), 0u);
  EXPECT_EQ(streamed.streamed_content(), "Let me look.");
  const auto ours = streamed.of("kvgate");
  ASSERT_FALSE(ours.empty());
  EXPECT_EQ(ours.back().chunk["choices"][0]["finish_reason"], "stop");
  ASSERT_EQ(streamed.events.back().kind, "end");
  EXPECT_TRUE(streamed.events.back().complete);
  EXPECT_TRUE(f.upstream->calls("/completion").empty());
}

TEST(TurnTest, AStreamIsRelayedAsTheEngineSentItWithoutProgressOrUnaskedUsage) {
  Fixture f;
  auto out = f.turn({{"messages", json::array({user("hello")})}}, true);
  ASSERT_GE(out.events.size(), 4u);
  EXPECT_EQ(out.events[0].kind, "open");
  EXPECT_EQ(out.events[1].kind, "begin");
  const auto chunks = out.of("engine");
  ASSERT_EQ(chunks.size(), 3u);  // role, content, finish; not the progress, not the usage
  for (const auto& c : chunks) EXPECT_EQ(c.raw, "data: " + c.chunk.dump() + "\n\n");
  EXPECT_EQ(out.streamed_content(), "reply 1");
  EXPECT_EQ(out.progress_notes.size(), 1u);
  EXPECT_TRUE(out.events.back().complete);
  // Asked for, the usage chunk is relayed too; the engine was asked for it either way.
  auto with_usage = f.turn({{"messages", json::array({user("hello"), assistant("reply 1"), user("again")})}}, true,
                           true);
  const auto chunks2 = with_usage.of("engine");
  ASSERT_EQ(chunks2.size(), 4u);
  EXPECT_TRUE(chunks2.back().chunk.contains("usage"));
  EXPECT_EQ(f.chat_bodies()[1]["stream_options"]["include_usage"], true);
}

TEST(TurnTest, AnErrorInsideTheStreamIsRelayedAndTheSessionIsNotAdvanced) {
  Fixture f;
  (void)f.turn({{"messages", json::array({user("hello")})}}, true);
  auto out = f.turn(
      {{"messages", json::array({user("hello"), assistant("reply 1"), user("go on")})}}, true);
  const auto errors = out.of("engine_error");
  ASSERT_EQ(errors.size(), 0u);
  f.upstream->push(ScriptedAnswer::stream_failure("partial", "the engine broke"));
  auto failed = f.turn(
      {{"messages", json::array({user("hello"), assistant("reply 1"), user("go on"), assistant("reply 2"),
                                 user("and then")})}},
      true);
  const auto relayed = failed.of("engine_error");
  ASSERT_EQ(relayed.size(), 1u);
  EXPECT_EQ(relayed[0].chunk["error"]["message"], "the engine broke");
  EXPECT_EQ(relayed[0].raw.rfind("data: {\"error\"", 0), 0u) << relayed[0].raw;
  EXPECT_EQ(failed.streamed_content(), "partial");
  ASSERT_EQ(failed.events.back().kind, "end");
  EXPECT_FALSE(failed.events.back().complete);  // no [DONE]
  auto s = f.only_session();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->counters.requests, 3u);
  EXPECT_EQ(s->counters.errors, 1u);
  // The failed turn left the conversation at the second turn's reply.
  EXPECT_EQ(s->conversation.length, 4u);
}

TEST(TurnTest, ABodyThatFailsValidationIsRefusedByNameBeforeAnythingIsSent) {
  Fixture f;
  auto out = f.turn({{"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}});
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].kind, "fail");
  EXPECT_EQ(out.events[0].status, 400);
  EXPECT_EQ(out.events[0].chunk["error"]["param"], "messages[0].role");
  EXPECT_TRUE(f.chat_bodies().empty());
  EXPECT_EQ(f.gateway->sessions().size(), 0u);
}

}  // namespace
}  // namespace kvgate::gateway
