#include "wire/output_sequence.h"

#include <map>

#include <gtest/gtest.h>

#include "testing/wire_support.h"

namespace kvgate::wire {
namespace {

using nlohmann::json;

ChunkPieces text_piece(std::string text) {
  ChunkPieces p;
  p.text = std::move(text);
  return p;
}

ChunkPieces call_piece(size_t index, std::string id, std::string name, std::string args) {
  ChunkPieces p;
  p.tool_calls.push_back(
      {.index = index, .id = std::move(id), .name = std::move(name), .arguments = std::move(args)});
  return p;
}

std::string describe(const std::vector<BlockEvent>& events) {
  std::string out;
  for (const BlockEvent& e : events) {
    switch (e.type) {
      case BlockEvent::Type::kOpen:
        out += "open" + std::to_string(e.block) +
               (e.kind == BlockKind::kToolCall ? "(" + e.call_id + "," + e.name + ")" : "");
        break;
      case BlockEvent::Type::kDelta:
        out += "+" + e.text;
        break;
      case BlockEvent::Type::kClose:
        out += "close" + std::to_string(e.block);
        break;
    }
    out += " ";
  }
  return out;
}

std::vector<BlockEvent> run(OutputSequencer& s, const std::vector<ChunkPieces>& pieces) {
  std::vector<BlockEvent> all;
  for (const ChunkPieces& p : pieces) {
    for (BlockEvent& e : s.feed(p)) all.push_back(std::move(e));
  }
  for (BlockEvent& e : s.finish()) all.push_back(std::move(e));
  return all;
}

TEST(OutputSequenceTest, SequentialPiecesGoOutAsTheyCome) {
  ChunkPieces thinking;
  thinking.reasoning = "hm";
  OutputSequencer s;
  EXPECT_EQ(describe(s.feed(thinking)), "open0 +hm ");
  EXPECT_EQ(describe(s.feed(text_piece("Hi"))), "close0 open1 +Hi ");
  EXPECT_EQ(describe(s.feed(text_piece(""))), "");
  EXPECT_EQ(describe(s.feed(call_piece(0, "c1", "read", "{\"p\":"))), "close1 open2(c1,read) +{\"p\": ");
  EXPECT_EQ(describe(s.feed(call_piece(0, "", "", "1}"))), "+1} ");
  EXPECT_EQ(describe(s.feed(call_piece(1, "c2", "list", "{}"))), "close2 open3(c2,list) +{} ");
  ChunkPieces end;
  end.finish_reason = "tool_calls";
  EXPECT_EQ(describe(s.feed(end)), "");
  EXPECT_EQ(describe(s.finish()), "close3 ");
  EXPECT_EQ(describe(s.finish()), "");
  EXPECT_EQ(describe(s.feed(text_piece("late"))), "");
  EXPECT_EQ(s.finish_reason(), "tool_calls");
  EXPECT_TRUE(s.has_tool_calls());
}

TEST(OutputSequenceTest, InterleavedCallsWaitUntilTheOpenOneIsComplete) {
  OutputSequencer s;
  EXPECT_EQ(describe(s.feed(call_piece(0, "a", "f", "{\"x\""))), "open0(a,f) +{\"x\" ");
  EXPECT_EQ(describe(s.feed(call_piece(1, "b", "g", "{\"y\""))), "");  // call 0 is not complete
  EXPECT_EQ(describe(s.feed(call_piece(1, "", "", ":2"))), "");
  EXPECT_EQ(describe(s.feed(text_piece("t"))), "");  // text waits behind the calls
  // Completing call 0 lets call 1 open with all it has, and the text after it (call 1 is
  // incomplete, so the text keeps waiting).
  EXPECT_EQ(describe(s.feed(call_piece(0, "", "", ":1}"))), "+:1} close0 open1(b,g) +{\"y\":2 ");
  EXPECT_EQ(describe(s.feed(call_piece(1, "", "", "}"))), "+} close1 open2 +t ");
  EXPECT_EQ(describe(s.finish()), "close2 ");
}

TEST(OutputSequenceTest, ACallOpensOnlyOnceItHasAName) {
  OutputSequencer s;
  EXPECT_EQ(describe(s.feed(call_piece(0, "a", "", "{"))), "");
  EXPECT_EQ(describe(s.feed(call_piece(0, "", "late_name", "}"))), "open0(a,late_name) +{} ");
  OutputSequencer nameless;
  EXPECT_EQ(describe(nameless.feed(call_piece(0, "a", "", "{}"))), "");
  EXPECT_EQ(describe(nameless.finish()), "open0(a,) +{} close0 ");
}

TEST(OutputSequenceTest, TrailingPiecesOfAClosedCallAreDropped) {
  OutputSequencer s;
  EXPECT_EQ(describe(run(s, {call_piece(0, "a", "f", "{}"), call_piece(1, "b", "g", "{}"),
                             call_piece(0, "", "", " ")})),
            "open0(a,f) +{} close0 open1(b,g) +{} close1 ");
}

TEST(OutputSequenceTest, CallsWithoutIdsGetIdsFromTheReply) {
  OutputSequencer s;
  ChunkPieces p = call_piece(2, "", "f", "{}");
  p.id = "chatcmpl-abc";
  EXPECT_EQ(describe(run(s, {p})), "open0(call_abc_2,f) +{} close0 ");
  EXPECT_EQ(fallback_call_id("chatcmpl-abc", 2), "call_abc_2");
}

TEST(OutputSequenceTest, CompleteJson) {
  EXPECT_TRUE(complete_json("{}"));
  EXPECT_TRUE(complete_json(" {\"a\": [1, 2]}\n"));
  EXPECT_TRUE(complete_json("[1]"));
  EXPECT_TRUE(complete_json("\"s\""));
  EXPECT_TRUE(complete_json("12"));
  EXPECT_TRUE(complete_json("true"));
  EXPECT_TRUE(complete_json("null"));
  EXPECT_FALSE(complete_json(""));
  EXPECT_FALSE(complete_json("{\"a\": 1"));
  EXPECT_FALSE(complete_json("{\"a\": \"}\""));
  EXPECT_FALSE(complete_json("{} {}"));
}

// What a block sequence holds: per kind the concatenated deltas, and per call its block.
struct Rebuilt {
  std::string reasoning;
  std::string text;
  std::map<std::string, std::pair<std::string, std::string>> calls;  // id → (name, arguments)
};

Rebuilt check_and_rebuild(const std::vector<BlockEvent>& events) {
  Rebuilt r;
  std::map<size_t, BlockEvent> opened;
  std::map<size_t, std::string> args;
  int open = -1;
  size_t next = 0;
  for (const BlockEvent& e : events) {
    switch (e.type) {
      case BlockEvent::Type::kOpen:
        EXPECT_EQ(open, -1) << "two blocks open";
        EXPECT_EQ(e.block, next++) << "blocks must open in order";
        open = static_cast<int>(e.block);
        opened[e.block] = e;
        break;
      case BlockEvent::Type::kDelta:
        EXPECT_EQ(static_cast<int>(e.block), open) << "delta for a block that is not open";
        EXPECT_FALSE(e.text.empty());
        if (e.kind == BlockKind::kReasoning) r.reasoning += e.text;
        if (e.kind == BlockKind::kText) r.text += e.text;
        if (e.kind == BlockKind::kToolCall) args[e.block] += e.text;
        break;
      case BlockEvent::Type::kClose:
        EXPECT_EQ(static_cast<int>(e.block), open) << "close of a block that is not open";
        open = -1;
        break;
    }
  }
  EXPECT_EQ(open, -1) << "a block is left open";
  for (const auto& [block, e] : opened) {
    if (e.kind != BlockKind::kToolCall) continue;
    EXPECT_EQ(r.calls.count(e.call_id), 0u) << "call " << e.call_id << " in two blocks";
    r.calls[e.call_id] = {e.name, args[block]};
  }
  return r;
}

TEST(OutputSequenceTest, AnyChunkOrderGivesEachPieceOnceInOneBlock) {
  std::mt19937 rng(7);
  for (int round = 0; round < 600; ++round) {
    const testing::ReplySpec spec = testing::random_reply(rng);
    testing::ChunkOptions options;
    options.interleave_calls = round % 2 == 1;
    options.noise = round % 3 == 0;
    options.omit_finish = round % 5 == 0;
    options.usage_in_finish = round % 4 == 0;
    OutputSequencer s;
    std::vector<BlockEvent> events;
    for (const json& chunk : testing::chunks_for(spec, rng, options)) {
      for (BlockEvent& e : s.feed(read_chunk(chunk))) events.push_back(std::move(e));
    }
    const std::vector<BlockEvent> at_finish = s.finish();
    if (!options.interleave_calls) {
      // In the engine's order nothing waits: finish() has only the last block to close.
      EXPECT_EQ(describe(at_finish),
                events.empty() ? "" : "close" + std::to_string(events.back().block) + " ");
    }
    for (const BlockEvent& e : at_finish) events.push_back(e);
    const Rebuilt r = check_and_rebuild(events);
    EXPECT_EQ(r.reasoning, spec.reasoning);
    EXPECT_EQ(r.text, spec.text);
    ASSERT_EQ(r.calls.size(), spec.calls.size());
    for (const ToolCall& c : spec.calls) {
      EXPECT_EQ(r.calls.at(c.id).first, c.name);
      EXPECT_EQ(r.calls.at(c.id).second, c.arguments) << "round " << round;
    }
  }
}

TEST(OutputSequenceTest, ChunkReading) {
  const json chunk = json::parse(R"({"id": "chatcmpl-1", "choices": [{"index": 0, "finish_reason": null,
    "delta": {"reasoning_content": "r", "content": "c", "tool_calls": [
      {"index": 3, "id": "x", "function": {"name": "n", "arguments": "{"}},
      {"index": 100000, "function": {"arguments": "dropped"}},
      {"index": -1, "function": {"arguments": "dropped"}},
      {"function": {"arguments": "no index: its position"}}, "junk"]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}}})");
  const ChunkPieces p = read_chunk(chunk);
  EXPECT_EQ(p.id, "chatcmpl-1");
  EXPECT_EQ(p.reasoning, "r");
  EXPECT_EQ(p.text, "c");
  EXPECT_FALSE(p.finish_reason);
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].index, 3u);
  EXPECT_EQ(p.tool_calls[0].name, "n");
  EXPECT_EQ(p.tool_calls[1].index, 3u);  // the fourth entry, position 3
  ASSERT_TRUE(p.usage);
  EXPECT_EQ(p.usage->prompt_tokens, 10);
  EXPECT_EQ(p.usage->cached_tokens, 4);
  EXPECT_EQ(p.usage->completion_tokens, 2);
  for (const char* odd : {R"(null)", R"([])", R"({"choices": "x"})", R"({"choices": [{"delta": 5}]})",
                          R"({"choices": [{"delta": {"content": 5, "tool_calls": {}}}]})"}) {
    const ChunkPieces q = read_chunk(json::parse(odd));
    EXPECT_TRUE(q.text.empty() && q.tool_calls.empty() && !q.usage) << odd;
  }
}

TEST(OutputSequenceTest, UsageFromTimingsAndDetails) {
  auto u = read_usage(json::parse(R"({"usage": {"prompt_tokens": 50, "completion_tokens": 5},
                                      "timings": {"cache_n": 30, "prompt_n": 20, "predicted_n": 5}})"));
  ASSERT_TRUE(u);
  EXPECT_EQ(u->prompt_tokens, 50);
  EXPECT_EQ(u->cached_tokens, 30);
  EXPECT_EQ(u->completion_tokens, 5);
  EXPECT_FALSE(read_usage(json::parse(R"({"timings": {"cache_n": 30, "prompt_n": 20, "predicted_n": 1}})")));
  auto reasoning = read_usage(json::parse(R"({"usage": {"prompt_tokens": 5, "completion_tokens": 9,
    "completion_tokens_details": {"reasoning_tokens": 6}}})"));
  EXPECT_EQ(reasoning->reasoning_tokens, 6);
  auto capped = read_usage(
      json::parse(R"({"usage": {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}}})"));
  EXPECT_EQ(capped->cached_tokens, 5);
  EXPECT_FALSE(read_usage(json::parse(R"({"id": "x"})")));
}

}  // namespace
}  // namespace kvgate::wire
