#include "bench/client_sim.h"

#include <set>

#include <gtest/gtest.h>

#include "util/json.h"

namespace kvgate::bench {
namespace {

using nlohmann::json;

json text_reply(const std::string& text) { return {{"role", "assistant"}, {"content", text}}; }

json calls_reply(size_t n, size_t turn) {
  json calls = json::array();
  const char* names[] = {"read_file", "search_logs", "run_shell", "fetch_url"};
  for (size_t i = 0; i < n; ++i) {
    calls.push_back({{"id", "call_" + std::to_string(turn) + "_" + std::to_string(i)},
                     {"type", "function"},
                     {"function", {{"name", names[i % 4]}, {"arguments", "{\"path\": \"src/a.cc\"}"}}}});
  }
  return {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", calls}};
}

// The replies a server might give: text, and on tool turns `calls` calls.
std::vector<ClientTurn> run(const ClientSpec& spec, uint64_t seed, size_t turns, size_t calls = 0,
                            size_t client = 0) {
  ClientSim sim(spec, seed, client);
  std::vector<ClientTurn> out;
  std::optional<json> reply;
  for (size_t k = 0; k < turns; ++k) {
    out.push_back(sim.next(reply));
    const ClientTurn& t = out.back();
    if (t.asks_tool_call && calls > 0) {
      reply = calls_reply(calls, t.number);
    } else {
      reply = text_reply("Reply " + std::to_string(t.number) + " of the model.");
    }
  }
  return out;
}

const json& messages(const ClientTurn& t) { return t.body["messages"]; }

ClientSpec spec_named(const std::string& name, size_t turns = 20) {
  for (const auto& s : client_family(16384, turns)) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "no behaviour " << name;
  return {};
}

TEST(ClientSimTest, SameSeedSameBodiesOtherSeedOtherBodies) {
  for (const auto& spec : client_family(8192, 12)) {
    const auto a = run(spec, 7, 12, 3);
    const auto b = run(spec, 7, 12, 3);
    const auto c = run(spec, 8, 12, 3);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].body, b[k].body) << spec.name << " turn " << k + 1;
      EXPECT_EQ(a[k].increment_from, b[k].increment_from) << spec.name;
    }
    EXPECT_NE(a.back().body, c.back().body) << spec.name;
  }
}

TEST(ClientSimTest, AppendOnlyEchoesTheReplyAndOnlyGrows) {
  const auto turns = run(spec_named("append"), 3, 10);
  EXPECT_TRUE(turns[0].new_conversation);
  EXPECT_EQ(turns[0].kind, "first");
  for (size_t k = 1; k < turns.size(); ++k) {
    const json& prev = messages(turns[k - 1]);
    const json& cur = messages(turns[k]);
    ASSERT_EQ(cur.size(), prev.size() + 2) << "reply + one user message";
    for (size_t i = 0; i < prev.size(); ++i) EXPECT_EQ(cur[i], prev[i]) << "turn " << k + 1 << " message " << i;
    EXPECT_EQ(cur[prev.size()], text_reply("Reply " + std::to_string(k) + " of the model."));
    EXPECT_EQ(cur.back()["role"], "user");
    ASSERT_TRUE(turns[k].increment_from);
    EXPECT_EQ(*turns[k].increment_from, prev.size());
    EXPECT_FALSE(turns[k].rewritten_from);
    EXPECT_FALSE(turns[k].new_conversation);
    EXPECT_FALSE(turns[k].body.contains("tools"));
    EXPECT_EQ(turns[k].body["stream"], false);
  }
}

TEST(ClientSimTest, GrowthIsAboutTheTokensAsked) {
  ClientSpec spec{.growth_tokens = 400, .mix = {.prose = 1, .code = 0, .log = 0}};
  const auto turns = run(spec, 11, 41);
  double bytes = 0;
  for (size_t k = 1; k < turns.size(); ++k) bytes += static_cast<double>(messages(turns[k]).back()["content"].get<std::string>().size());
  const double tokens_per_turn = bytes / 40 / bytes_per_token(TextKind::kProse);
  EXPECT_GT(tokens_per_turn, 400 * 0.85);
  EXPECT_LT(tokens_per_turn, 400 * 1.15);
}

TEST(ClientSimTest, ToolTurnsAnswerEveryCallAndReorderOnTheNextTurn) {
  ClientSpec spec = spec_named("tools");
  spec.huge_results = 0;
  const auto turns = run(spec, 5, 16, 3);
  bool reordered_seen = false;
  for (size_t k = 0; k < turns.size(); ++k) {
    const ClientTurn& t = turns[k];
    ASSERT_TRUE(t.body.contains("tools")) << "tools are declared on every request";
    EXPECT_EQ(t.body["tool_choice"], t.asks_tool_call ? "required" : "auto");
    if (k == 0 || !turns[k - 1].asks_tool_call) continue;
    // The previous turn got three calls: this one answers them, in call order.
    const json& m = messages(t);
    ASSERT_EQ(t.tool_results, 3U);
    ASSERT_GE(m.size(), 4U);
    const size_t first = m.size() - 3;
    EXPECT_EQ(m[first - 1]["tool_calls"].size(), 3U);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(m[first + i]["role"], "tool");
      EXPECT_EQ(m[first + i]["tool_call_id"], "call_" + std::to_string(k) + "_" + std::to_string(i));
    }
    if (k + 1 >= turns.size()) continue;
    // The turn after re-sends the same three results in another order.
    const json& next = messages(turns[k + 1]);
    std::vector<std::string> ids, again;
    for (size_t i = 0; i < 3; ++i) {
      ids.push_back(m[first + i]["tool_call_id"]);
      again.push_back(next[first + i]["tool_call_id"]);
    }
    EXPECT_NE(ids, again);
    EXPECT_EQ(std::multiset<std::string>(ids.begin(), ids.end()), std::multiset<std::string>(again.begin(), again.end()));
    EXPECT_FALSE(turns[k + 1].rewritten_from) << "a reorder is not a rewrite";
    reordered_seen = true;
  }
  EXPECT_TRUE(reordered_seen);
}

TEST(ClientSimTest, HugeResultsAreAFractionOfTheContext) {
  ClientSpec spec{.context_tokens = 8192, .tool_turns = 1, .huge_results = 1};
  const auto turns = run(spec, 2, 3, 1);
  const std::string result = messages(turns[1]).back()["content"];
  const double tokens = static_cast<double>(result.size()) / bytes_per_token(TextKind::kCode);  // read_file
  EXPECT_GT(tokens, 0.2 * 8192 * 0.8);
  EXPECT_LT(tokens, 0.6 * 8192 * 1.2);
}

TEST(ClientSimTest, MessageWindowKeepsTheLastK) {
  ClientSpec spec{.window_messages = 6};
  const auto turns = run(spec, 1, 12);
  for (size_t k = 0; k < turns.size(); ++k) {
    const json& m = messages(turns[k]);
    EXPECT_LE(m.size(), 7U);
    if (k >= 3) {
      EXPECT_EQ(turns[k].dropped, k == 3 ? 1U : 2U) << "turn " << k + 1;
    }
    if (k == 0) continue;
    // What is kept is the tail of the previous request + reply.
    const json& prev = messages(turns[k - 1]);
    EXPECT_EQ(m[m.size() - 3], prev.back());
  }
  EXPECT_EQ(messages(turns.back())[1]["role"], "assistant") << "a plain window may start with an assistant turn";
}

TEST(ClientSimTest, TokenWindowStaysUnderItsBudget) {
  ClientSpec spec{.growth_tokens = 800, .window_tokens = 4000};
  const auto turns = run(spec, 4, 20);
  size_t dropped = 0;
  for (const auto& t : turns) {
    uint64_t total = 0;
    for (size_t i = 1; i < messages(t).size(); ++i) total += estimated_tokens(util::json_text(messages(t)[i]));
    EXPECT_LE(total, 4000U) << "turn " << t.number;
    dropped += t.dropped;
  }
  EXPECT_GT(dropped, 10U);
}

TEST(ClientSimTest, IdsChangeWhereTheClientPutsThem) {
  ClientSpec spec = spec_named("ids");
  spec.tool_turns = 0;
  const auto turns = run(spec, 9, 4);
  const json& a = messages(turns[1]);
  const json& b = messages(turns[2]);
  const std::string sa = a[0]["content"], sb = b[0]["content"];
  EXPECT_NE(sa.substr(0, sa.find('\n')), sb.substr(0, sb.find('\n'))) << "system: clock and request id";
  EXPECT_EQ(sa.substr(sa.find('\n')), sb.substr(sb.find('\n')));
  const std::string fa = a[1]["content"], fb = b[1]["content"];
  EXPECT_NE(fa, fb) << "first user message: environment block";
  EXPECT_EQ(fa.substr(fa.find("</environment>")), fb.substr(fb.find("</environment>")));
  EXPECT_EQ(b.back()["content"].get<std::string>().rfind("[request ", 0), 0U);
  EXPECT_EQ(a[3], b[3]) << "a later user message keeps its id";
  EXPECT_FALSE(turns[2].rewritten_from) << "volatile values are not rewrites";
}

TEST(ClientSimTest, SelfSummaryAsksThenStartsAgainFromTheReply) {
  ClientSpec spec{.summarise_every = 4};
  ClientSim sim(spec, 3);
  std::optional<json> reply;
  std::vector<ClientTurn> turns;
  for (int k = 0; k < 6; ++k) {
    turns.push_back(sim.next(reply));
    reply = text_reply(turns.back().kind == "summary_request" ? "SUMMARY-TEXT" : "ok");
  }
  const ClientTurn& ask = turns[3];
  EXPECT_EQ(ask.kind, "summary_request");
  EXPECT_EQ(ask.body["max_tokens"], 256);
  EXPECT_NE(messages(ask).back()["content"].get<std::string>().find("summary"), std::string::npos);
  const ClientTurn& cont = turns[4];
  EXPECT_EQ(cont.kind, "continuation");
  EXPECT_TRUE(cont.new_conversation);
  EXPECT_FALSE(cont.increment_from);
  ASSERT_EQ(messages(cont).size(), 3U);
  EXPECT_EQ(messages(cont)[0], messages(ask)[0]);
  const std::string text = messages(cont)[1]["content"];
  EXPECT_EQ(text.rfind("This session is being continued from a previous conversation", 0), 0U);
  EXPECT_NE(text.find("SUMMARY-TEXT"), std::string::npos);
  // The instruction was a side request: the turn after continues the new conversation.
  EXPECT_EQ(messages(turns[5]).size(), 5U);
}

TEST(ClientSimTest, FailedSummaryKeepsTheHistory) {
  ClientSim sim(ClientSpec{.summarise_every = 2}, 3);
  auto first = sim.next(std::nullopt);
  auto ask = sim.next(text_reply("a"));
  ASSERT_EQ(ask.kind, "summary_request");
  auto after = sim.next(std::nullopt);
  EXPECT_EQ(after.kind, "user");
  EXPECT_FALSE(after.new_conversation);
  EXPECT_EQ(messages(after).size(), messages(first).size() + 2);  // reply "a" and a new message
}

TEST(ClientSimTest, EditsRewriteOneEarlierMessage) {
  ClientSpec spec = spec_named("edits");
  const auto turns = run(spec, 6, 13, 2);
  size_t edits = 0;
  for (size_t k = 1; k < turns.size(); ++k) {
    if (!turns[k].rewritten_from) continue;
    ++edits;
    EXPECT_EQ(turns[k].number % 4, 0U);
    const size_t i = *turns[k].rewritten_from;
    const json& prev = messages(turns[k - 1]);
    const json& cur = messages(turns[k]);
    ASSERT_LT(i, prev.size());
    EXPECT_NE(cur[i], prev[i]);
    for (size_t j = 0; j < prev.size(); ++j) {
      if (j != i) {
        EXPECT_EQ(cur[j], prev[j]) << "turn " << k + 1 << " message " << j;
      }
    }
  }
  EXPECT_EQ(edits, 3U);
}

TEST(ClientSimTest, PastedHistoryIsThreeContexts) {
  const auto turns = run(spec_named("pasted"), 2, 2);
  size_t bytes = 0;
  for (const auto& m : messages(turns[0])) bytes += util::json_text(m).size();
  EXPECT_GT(static_cast<double>(bytes), 3 * 16384 * 3.1);
  EXPECT_GT(messages(turns[0]).size(), 40U);
  EXPECT_EQ(messages(turns[1]).size(), messages(turns[0]).size() + 2);
}

TEST(ClientSimTest, FailedTurnStaysInTheHistory) {
  ClientSim sim(ClientSpec{}, 1);
  auto a = sim.next(std::nullopt);
  auto b = sim.next(std::nullopt);
  ASSERT_EQ(messages(b).size(), messages(a).size() + 1);
  EXPECT_EQ(messages(b)[1], messages(a)[1]);
  EXPECT_EQ(messages(b)[2]["role"], "user");
  EXPECT_EQ(*b.increment_from, 2U);
}

TEST(ClientSimTest, ParallelClientsShareTheAgentNotTheTask) {
  const ClientSpec spec = spec_named("parallel");
  const auto a = run(spec, 4, 2, 0, 0);
  const auto b = run(spec, 4, 2, 0, 1);
  EXPECT_EQ(messages(a[0])[0], messages(b[0])[0]);
  EXPECT_NE(messages(a[0])[1], messages(b[0])[1]);
}

TEST(ClientSimTest, SelectsBehavioursByName) {
  const auto family = client_family(8192, 20);
  auto two = select_behaviours(family, "tools,edits");
  ASSERT_TRUE(two.ok()) << two.error().message();
  ASSERT_EQ(two->size(), 2U);
  EXPECT_EQ((*two)[1].name, "edits");
  EXPECT_EQ(select_behaviours(family, "all")->size(), family.size());
  auto bad = select_behaviours(family, "tools,nope");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("unknown behaviour \"nope\""), std::string::npos);
}

TEST(ClientTextTest, IsoTimeAndIds) {
  EXPECT_EQ(iso_time(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(iso_time(1'767'225'600'000), "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(iso_time(951'782'400'123), "2000-02-29T00:00:00.123Z");
  EXPECT_EQ(iso_time(-1), "1969-12-31T23:59:59.999Z");
  Rng rng(1);
  const std::string uuid = make_id(rng, IdFormat::kUuid, 0);
  ASSERT_EQ(uuid.size(), 36U);
  EXPECT_EQ(uuid[14], '4');
  EXPECT_NE(std::string("89ab").find(uuid[19]), std::string::npos);
  EXPECT_EQ(make_id(rng, IdFormat::kRequestId, 0).size(), 28U);
  EXPECT_EQ(make_id(rng, IdFormat::kTraceparent, 0).size(), 55U);
  EXPECT_EQ(make_id(rng, IdFormat::kEpochMs, 1234), "1234");
}

TEST(ClientTextTest, RandomDrawsStayInRangeAndRepeat) {
  Rng a(42), b(42);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.below(7);
    EXPECT_LT(x, 7U);
    EXPECT_EQ(x, b.below(7));
    const double u = a.unit();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    b.unit();
  }
  EXPECT_NE(mix_seed(1, 0), mix_seed(1, 1));
  EXPECT_EQ(mix_seed(1, 1), mix_seed(1, 1));
}

TEST(ClientTextTest, TextSizesFollowTheDensities) {
  for (TextKind kind : {TextKind::kProse, TextKind::kCode, TextKind::kLog, TextKind::kChinese}) {
    Rng rng(3);
    const std::string text = make_text(rng, kind, 1000, 1'767'225'600'000, true);
    const double tokens = static_cast<double>(text.size()) / bytes_per_token(kind);
    EXPECT_GE(tokens, 1000) << text_kind_name(kind);
    EXPECT_LT(tokens, 1080) << text_kind_name(kind);
  }
}

TEST(ParseSeedsTest, ReadsAListAndNamesTheItemThatIsNotANumber) {
  auto seeds = parse_seeds("1,2,30");
  ASSERT_TRUE(seeds.ok()) << seeds.error().message();
  EXPECT_EQ(*seeds, (std::vector<uint64_t>{1, 2, 30}));
  auto bad = parse_seeds("1,x2");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("\"x2\""), std::string::npos) << bad.error().message();
  EXPECT_FALSE(parse_seeds("1,,2").ok());
}

}  // namespace
}  // namespace kvgate::bench
