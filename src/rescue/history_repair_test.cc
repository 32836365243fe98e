#include "rescue/history_repair.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "rescue/relaxed_json.h"
#include "testing/paths.h"

namespace kvgate::rescue {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kFaults = fs::path(kvgate::testing::source_dir()) / "tests" / "fixtures" / "history_faults";

std::set<std::string> kinds(const RepairedHistory& r) {
  std::set<std::string> out;
  for (const auto& x : r.repairs) out.insert(std::string(repair_kind_name(x.kind)));
  return out;
}

std::string args_after(RepairKind* kind, const json& arguments) {
  auto r = repair_arguments(&arguments, "_raw", kind);
  return r ? *r : std::string("<unchanged>");
}

// ---- The recorded faults (tests/fixtures/history_faults, answers of the pinned engine) ----

// What each recorded fault must be repaired into (from the repair rules in the header).
const std::map<std::string, std::set<std::string>> kExpectedRepairs = {
    {"control", {}},
    {"args_truncated_object", {"arguments_closed"}},
    {"args_truncated_brace", {"arguments_closed"}},
    {"args_empty_string", {"arguments_empty"}},
    {"args_not_json", {"arguments_wrapped"}},
    {"args_single_quotes", {"arguments_relaxed"}},
    {"args_trailing_comma", {"arguments_relaxed"}},
    {"args_json_array", {"arguments_not_object"}},
    {"args_json_string", {"arguments_not_object"}},
    {"args_json_number", {"arguments_not_object"}},
    {"args_json_null_text", {"arguments_not_object"}},
    {"args_double_encoded", {"arguments_not_object"}},
    {"args_null", {"arguments_not_object"}},
    {"args_missing", {"arguments_missing"}},
    {"args_object", {}},
    {"call_id_missing", {}},
    {"call_id_null", {"call_id_fixed"}},
    {"call_type_missing", {"call_type_set"}},
    {"call_type_other", {"call_type_set"}},
    {"call_name_missing", {"call_dropped", "orphan_tool_result"}},
    {"call_name_unknown", {}},
    {"tool_calls_null", {}},
    {"tool_calls_empty", {}},
    {"tool_calls_object", {"tool_calls_fixed"}},
    {"result_orphan", {"orphan_tool_result"}},
    {"result_without_any_call", {"orphan_tool_result"}},
    {"result_id_missing", {}},
    {"result_id_null", {"tool_call_id_fixed"}},
    {"result_id_number", {"tool_call_id_fixed", "orphan_tool_result"}},
    {"result_content_object", {"content_fixed"}},
    {"result_content_null", {}},
    {"result_content_array", {"content_fixed"}},
    {"result_missing_for_call", {}},
    {"assistant_empty_string", {}},
    {"assistant_content_null", {}},
    {"assistant_no_content", {"content_added"}},
    {"assistant_whitespace", {}},
    {"reasoning_content_null", {"field_fixed"}},
    {"message_name_null", {"field_fixed"}},
    {"content_part_no_type", {"content_fixed"}},
    {"consecutive_user", {}},
    {"consecutive_assistant", {}},
    {"system_not_first", {}},
    {"duplicate_call_ids", {}},
    {"trailing_assistant_tool_call", {}},
    {"two_trailing_assistants", {}},
    {"tool_description_null", {"tool_fixed"}},
    {"tool_description_missing", {}},
    {"tool_description_number", {"tool_fixed"}},
    {"tool_parameters_null", {}},
    {"tool_parameters_missing", {}},
    {"tool_name_missing", {"tool_dropped"}},
    {"tool_type_missing", {"tool_fixed"}},
    {"tool_function_missing", {"tool_fixed"}},
};

// Faults the pinned engine rejects that are deliberately not repaired: the shape of the
// current turn (the client must change it) or a template-specific rule (opt-in repairs).
const std::set<std::string> kNotRepaired = {
    "trailing_assistant_tool_call", "two_trailing_assistants", "system_not_first", "duplicate_call_ids"};

std::vector<json> fixtures() {
  std::vector<json> out;
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(kFaults)) {
    if (e.path().extension() == ".json") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    std::ifstream in(p);
    out.push_back(json::parse(in, nullptr, false));
  }
  return out;
}

TEST(HistoryRepairFixtures, EveryRecordedFaultHasAnExpectation) {
  auto all = fixtures();
  ASSERT_GE(all.size(), 50u);
  for (const auto& f : all) {
    ASSERT_TRUE(f.is_object());
    EXPECT_TRUE(kExpectedRepairs.count(f.value("fault", ""))) << f.value("fault", "");
  }
}

TEST(HistoryRepairFixtures, RepairsMatchTheRules) {
  for (const auto& f : fixtures()) {
    const std::string name = f.value("fault", "");
    const json& req = f.at("request");
    auto r = repair_history(req.at("messages"), req.value("tools", json()));
    EXPECT_EQ(kinds(r), kExpectedRepairs.at(name)) << name;
    if (kExpectedRepairs.at(name).empty()) {
      EXPECT_EQ(r.messages, req.at("messages")) << name;
      EXPECT_EQ(r.tools, req.value("tools", json())) << name;
    }
  }
}

TEST(HistoryRepairFixtures, EveryFaultTheEngineRejectsIsRepairedUnlessListed) {
  for (const auto& f : fixtures()) {
    const std::string name = f.value("fault", "");
    bool rejected = false;
    for (const auto& [tmpl, answer] : f.at("engine").items()) rejected = rejected || answer.value("status", 0) != 200;
    if (!rejected || kNotRepaired.count(name)) continue;
    const json& req = f.at("request");
    auto r = repair_history(req.at("messages"), req.value("tools", json()));
    EXPECT_TRUE(r.changed()) << name << " is rejected by the engine but not repaired";
  }
}

TEST(HistoryRepairFixtures, RepairIsIdempotentAndDeterministic) {
  for (const auto& f : fixtures()) {
    const json& req = f.at("request");
    auto a = repair_history(req.at("messages"), req.value("tools", json()));
    auto b = repair_history(req.at("messages"), req.value("tools", json()));
    EXPECT_EQ(a.messages.dump(), b.messages.dump()) << f.value("fault", "");
    EXPECT_EQ(a.tools.dump(), b.tools.dump()) << f.value("fault", "");
    auto again = repair_history(a.messages, a.tools);
    EXPECT_FALSE(again.changed()) << f.value("fault", "") << ": "
                                  << (again.repairs.empty() ? "" : again.repairs[0].path);
  }
}

TEST(HistoryRepairFixtures, RepairOfAPrefixIsAPrefixOfTheRepair) {
  HistoryRepairOptions strict;
  strict.convert_late_system_messages = true;
  strict.drop_empty_assistant_turns = true;
  for (const auto& options : {HistoryRepairOptions{}, strict}) {
    for (const auto& f : fixtures()) {
      const json& messages = f.at("request").at("messages");
      auto whole = repair_history(messages, json(), options).messages;
      for (size_t k = 0; k <= messages.size(); ++k) {
        json head = json::array();
        for (size_t i = 0; i < k; ++i) head.push_back(messages[i]);
        auto part = repair_history(head, json(), options).messages;
        ASSERT_LE(part.size(), whole.size());
        for (size_t i = 0; i < part.size(); ++i) {
          EXPECT_EQ(part[i].dump(), whole[i].dump()) << f.value("fault", "") << " prefix " << k;
        }
      }
    }
  }
}

// ---- The arguments repair, value by value ----

TEST(RepairArguments, ValidObjectsAreKeptByteForByte) {
  RepairKind k{};
  EXPECT_EQ(args_after(&k, "{ \"b\":1,  \"a\" : [ ] }"), "<unchanged>");
  EXPECT_EQ(args_after(&k, json{{"city", "Rome"}}), "<unchanged>");
}

TEST(RepairArguments, TruncatedTextIsClosed) {
  RepairKind k{};
  EXPECT_EQ(args_after(&k, "{\"a\": 1, \"b\": \"x"), "{\"a\": 1, \"b\": \"x\"}");
  EXPECT_EQ(k, RepairKind::kArgumentsClosed);
  EXPECT_EQ(args_after(&k, "{"), "{}");
  EXPECT_EQ(args_after(&k, "{\"a\": [1, 2"), "{\"a\": [1, 2]}");
  EXPECT_EQ(args_after(&k, "{\"a\": {\"b\": true, \"c\": nu"), "{\"a\": {\"b\": true}}");
  EXPECT_EQ(args_after(&k, "{\"path\": \"C:\\"), "{\"path\": \"C:\"}");
  EXPECT_EQ(args_after(&k, "{\"a\": 1, \"b"), "{\"a\": 1}");
  EXPECT_EQ(args_after(&k, "{\"a\": 1,"), "{\"a\": 1}");
  EXPECT_EQ(args_after(&k, "{\"s\": \"\\u00"), "{\"s\": \"\"}");
}

TEST(RepairArguments, EmptyNullAndMissingBecomeAnEmptyObject) {
  RepairKind k{};
  EXPECT_EQ(args_after(&k, ""), "{}");
  EXPECT_EQ(k, RepairKind::kArgumentsEmpty);
  EXPECT_EQ(args_after(&k, " \n"), "{}");
  EXPECT_EQ(args_after(&k, "null"), "{}");
  EXPECT_EQ(k, RepairKind::kArgumentsNotObject);
  EXPECT_EQ(args_after(&k, json()), "{}");
  EXPECT_EQ(*repair_arguments(nullptr, "_raw", &k), "{}");
  EXPECT_EQ(k, RepairKind::kArgumentsMissing);
}

TEST(RepairArguments, LenientJsonIsRewrittenStrictly) {
  RepairKind k{};
  EXPECT_EQ(args_after(&k, "{'city': 'Paris', 'metric': True}"), "{\"city\":\"Paris\",\"metric\":true}");
  EXPECT_EQ(k, RepairKind::kArgumentsRelaxed);
  EXPECT_EQ(args_after(&k, "{\"a\": 1,}"), "{\"a\":1}");
}

TEST(RepairArguments, EverythingElseIsWrappedUnderTheRawKey) {
  RepairKind k{};
  EXPECT_EQ(args_after(&k, "city=Paris"), "{\"_raw\":\"city=Paris\"}");
  EXPECT_EQ(k, RepairKind::kArgumentsWrapped);
  EXPECT_EQ(args_after(&k, "{\"a\": 1} trailing"), "{\"_raw\":\"{\\\"a\\\": 1} trailing\"}");
  EXPECT_EQ(args_after(&k, "[1, 2]"), "{\"_raw\":\"[1, 2]\"}");
  EXPECT_EQ(k, RepairKind::kArgumentsNotObject);
  EXPECT_EQ(args_after(&k, json::array({1, 2})), "{\"_raw\":\"[1,2]\"}");
  EXPECT_EQ(args_after(&k, 42), "{\"_raw\":\"42\"}");
  json x = "x";
  auto custom = repair_arguments(&x, "raw_arguments", &k);
  EXPECT_EQ(*custom, "{\"raw_arguments\":\"x\"}");
}

TEST(RepairArguments, DoubleEncodedObjectIsUnwrapped) {
  RepairKind k{};
  EXPECT_EQ(args_after(&k, "\"{\\\"city\\\": \\\"Paris\\\"}\""), "{\"city\": \"Paris\"}");
  EXPECT_EQ(args_after(&k, "\"Paris\""), "{\"_raw\":\"\\\"Paris\\\"\"}");
}

TEST(RepairArguments, EveryTruncationGivesAnObject) {
  const std::string doc =
      R"({"path": "src/a b.cc", "n": -12.5e3, "ok": true, "v": null, "list": [1, "two", {"x": "\u00e9\ud83d\ude00\n"}], "e": {}})";
  for (size_t n = 0; n < doc.size(); ++n) {
    RepairKind k{};
    json prefix = doc.substr(0, n);
    auto fixed = repair_arguments(&prefix, "_raw", &k);
    ASSERT_TRUE(fixed) << n;
    auto v = parse_strict_json(*fixed);
    ASSERT_TRUE(v && v->is_object()) << n << ": " << *fixed;
    if (n > 0) {
      EXPECT_NE(k, RepairKind::kArgumentsWrapped) << n << ": " << *fixed;
    }
  }
}

// ---- Messages and tools ----

json conversation() {
  return json::parse(R"([
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "a1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1"}}]},
    {"role": "tool", "tool_call_id": "a1", "content": "ok"},
    {"role": "user", "content": "next"}])");
}

TEST(HistoryRepair, RepairsAreReportedWithIndexPathAndDetail) {
  auto r = repair_history(conversation(), json());
  ASSERT_EQ(r.repairs.size(), 1u);
  const auto& x = r.repairs[0];
  EXPECT_EQ(x.kind, RepairKind::kArgumentsClosed);
  EXPECT_EQ(x.message, 2);
  EXPECT_EQ(x.tool, -1);
  EXPECT_EQ(x.path, "messages[2].tool_calls[0].function.arguments");
  EXPECT_EQ(x.detail, "\"{\\\"x\\\": 1\" -> {\"x\": 1}");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], "{\"x\": 1}");
}

TEST(HistoryRepair, NonArraysAndUnknownShapesPassThrough) {
  EXPECT_EQ(repair_history(json(), json()).messages, json());
  EXPECT_EQ(repair_history("text", 3).tools, json(3));
  json odd = json::array({1, "two", json::object(), json{{"role", 5}}});
  auto r = repair_history(odd, json());
  EXPECT_EQ(r.messages, odd);
  EXPECT_FALSE(r.changed());
}

TEST(HistoryRepair, UnusableCallIdsAreRemovedAndNumbersKeepTheirDigits) {
  json m = conversation();
  m[2]["tool_calls"][0]["id"] = nullptr;
  m[2]["tool_calls"][0]["function"]["arguments"] = "{}";
  auto r = repair_history(m, json());
  EXPECT_FALSE(r.messages[2]["tool_calls"][0].contains("id"));
  EXPECT_EQ(r.messages[3]["role"], "tool");  // still the answer to that call
  m[2]["tool_calls"][0]["id"] = 7;
  m[3]["tool_call_id"] = 7;
  r = repair_history(m, json());
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["id"], "7");
  EXPECT_EQ(r.messages[3], json({{"role", "tool"}, {"tool_call_id", "7"}, {"content", "ok"}}));
}

TEST(HistoryRepair, OrphanResultBecomesALabelledUserMessage) {
  json m = json::parse(R"([{"role": "tool", "tool_call_id": "c9", "content": "18 C"}])");
  auto r = repair_history(m, json());
  EXPECT_EQ(r.messages[0], json({{"role", "user"}, {"content", "[tool result for c9]\n18 C"}}));
  HistoryRepairOptions keep;
  keep.repair_orphan_tool_results = false;
  EXPECT_FALSE(repair_history(m, json(), keep).changed());
}

TEST(HistoryRepair, ResultsMatchCallsWithoutIdsByPosition) {
  json m = json::parse(R"([{"role": "assistant", "tool_calls": [{"type": "function",
      "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "x", "content": "r"}])");
  EXPECT_FALSE(repair_history(m, json()).changed());
}

TEST(HistoryRepair, OptInRepairs) {
  json m = json::parse(R"([{"role": "system", "content": "a"}, {"role": "user", "content": "u"},
      {"role": "assistant", "content": " "}, {"role": "system", "content": "b"}])");
  EXPECT_FALSE(repair_history(m, json()).changed());
  HistoryRepairOptions o;
  o.convert_late_system_messages = true;
  o.drop_empty_assistant_turns = true;
  auto r = repair_history(m, json(), o);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[2], json({{"role", "user"}, {"content", "b"}}));
  EXPECT_EQ(kinds(r), (std::set<std::string>{"empty_assistant_dropped", "system_message_moved"}));
  EXPECT_EQ(r.repairs[0].message, 2);
  EXPECT_EQ(r.repairs[1].message, 3);
}

TEST(HistoryRepair, ContentParts) {
  json m = json::parse(R"([{"role": "user", "content": ["a", {"text": "b"}, {"type": "text", "text": "c"}]}])");
  auto r = repair_history(m, json());
  EXPECT_EQ(r.messages[0]["content"], json::parse(R"([{"type": "text", "text": "a"},
      {"type": "text", "text": "b"}, {"type": "text", "text": "c"}])"));
}

TEST(HistoryRepair, ToolsAreFixedOrDroppedWithTheirInputIndex) {
  json tools = json::parse(R"([
    {"type": "function", "function": {"name": "a", "description": null}},
    "junk",
    {"type": "retrieval"},
    {"name": "b", "parameters": {"type": "object"}},
    {"function": {"name": "c", "description": ["x"]}}])");
  auto r = repair_history(json(), tools);
  EXPECT_EQ(r.tools, json::parse(R"([
    {"type": "function", "function": {"name": "a", "description": ""}},
    {"type": "function", "function": {"name": "b", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "c", "description": "[\"x\"]"}}])"));
  std::vector<int> indices;
  for (const auto& x : r.repairs) indices.push_back(x.tool);
  EXPECT_EQ(indices, (std::vector<int>{0, 1, 2, 3, 4, 4}));
}

TEST(HistoryRepair, DeeplyNestedValuesAreLeftAloneWithoutRecursing) {
  std::string deep(200000, '[');
  deep += std::string(200000, ']');
  json nested = json::parse(deep);
  json m = json::array();
  m.push_back({{"role", "tool"}, {"tool_call_id", "x"}, {"content", nullptr}});
  m[0]["content"] = std::move(nested);
  m.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array()}});
  json call = {{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}}}};
  call["function"]["arguments"] = json::parse(deep);
  m[1]["tool_calls"].push_back(std::move(call));
  auto r = repair_history(std::move(m), json());
  EXPECT_TRUE(r.messages[0]["content"].is_array());
  EXPECT_TRUE(r.messages[1]["tool_calls"][0]["function"]["arguments"].is_array());
}

}  // namespace
}  // namespace kvgate::rescue
