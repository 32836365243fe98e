#include "session/normalize.h"

#include <gtest/gtest.h>

namespace kvgate::session {
namespace {

using nlohmann::json;

TEST(NormalizeTest, MasksVolatileSubstrings) {
  EXPECT_EQ(mask_volatile("Current time: 2026-11-29 10:02:35\nYou are"), "Current time: <date> <time>\nYou are");
  EXPECT_EQ(mask_volatile("at 2026-11-29T10:02:35.123Z ok"), "at <date>T<time> ok");
  EXPECT_EQ(mask_volatile("ts 10:02:35+08:00."), "ts <time>.");
  EXPECT_EQ(mask_volatile("request 3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b done"), "request <uuid> done");
  EXPECT_EQ(mask_volatile("commit 80fb11ac73e66d89eae2c6a91d8a77428fa733ed"), "commit <hex>");
  EXPECT_EQ(mask_volatile("epoch 1795994900 ms 1795994900123"), "epoch <num> ms <num>");
  EXPECT_EQ(mask_volatile("今天是2026年11月29日，"), "今天是<date>，");
  // Ordinary text, short numbers and words that merely contain hex letters stay.
  EXPECT_EQ(mask_volatile("face cafe 12345 v1.2.3 abc123"), "face cafe 12345 v1.2.3 abc123");
  EXPECT_EQ(mask_volatile("deadbeefdeadbeefx"), "deadbeefdeadbeefx");  // not a whole token
}

TEST(NormalizeTest, MasksRandomBase62IdsButNotIdentifiers) {
  EXPECT_EQ(mask_volatile("request_id: req_011CV5Jm8Y2xq4Pz7Rt9Kd3W."), "request_id: <id>.");
  EXPECT_EQ(mask_volatile("[id=msg_01XFDUDYJgAACzvnptvVoYEL]"), "[id=<id>]");
  // Identifiers of code keep their form: no three capitals and three digits, or too short.
  EXPECT_EQ(mask_volatile("read_config_file_v2 getHttpClient2 parseJSON4Token8 Base64Enc"),
            "read_config_file_v2 getHttpClient2 parseJSON4Token8 Base64Enc");
  // A blob (a key, base64 data) longer than an id stays content.
  const std::string blob(80, 'A');
  EXPECT_EQ(mask_volatile(blob + "9z9z9zQQ"), blob + "9z9z9zQQ");
}

TEST(NormalizeTest, MasksNamedDates) {
  EXPECT_EQ(mask_volatile("Today's date is Wednesday, December 2, 2026."), "Today's date is <date>.");
  EXPECT_EQ(mask_volatile("due Dec 2nd 2026, or December 14, 2027"), "due <date>, or <date>");
  // A weekday or a month alone, or a month and a day without the year, is no date.
  EXPECT_EQ(mask_volatile("on Friday in May 2 of them"), "on Friday in May 2 of them");
  EXPECT_EQ(mask_volatile("Decembers 2, 2026 Mayday"), "Decembers 2, 2026 Mayday");
}

TEST(NormalizeTest, AMovedVolatileReminderLeavesTheMaskedFormOnly) {
  const json reminder = {{"type", "text"}, {"text", "<system-reminder>\nThe current date is: Wednesday, December 2, 2026.\n</system-reminder>"}};
  const json ask = {{"type", "text"}, {"text", "List the files."}};
  const json with = {{"role", "user"}, {"content", json::array({reminder, ask})}};
  const json without = {{"role", "user"}, {"content", json::array({ask})}};
  EXPECT_EQ(message_hash(with), message_hash(without));
  EXPECT_NE(exact_hash(with), exact_hash(without));
  // Alone, or longer than three lines, it is the message's content.
  EXPECT_NE(message_hash({{"role", "user"}, {"content", json::array({reminder})}}), message_hash(without));
  EXPECT_FALSE(is_volatile_reminder("a\nb\nc\nd 2026-12-02"));
  EXPECT_FALSE(is_volatile_reminder("no values here"));
  EXPECT_TRUE(is_volatile_reminder("<r>\nnow 10:02:35\n</r>"));
}

TEST(NormalizeTest, CanonicalMessageIgnoresWhatClientsVary) {
  json a = {{"role", "assistant"},
            {"content", "ok"},
            {"reasoning_content", "thinking..."},
            {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                         {"function", {{"name", "read_file"}, {"arguments", "{\"path\": \"a.txt\", \"n\": 1}"}}}}})}};
  json b = {{"role", "assistant"},
            {"content", "ok"},
            {"tool_calls", json::array({{{"id", "call_XYZ"}, {"type", "function"},
                                         {"function", {{"name", "read_file"}, {"arguments", "{\"n\":1,\"path\":\"a.txt\"}"}}}}})}};
  EXPECT_EQ(canonical_message(a), canonical_message(b));
  EXPECT_EQ(message_hash(a), message_hash(b));
  json c = b;
  c["tool_calls"][0]["function"]["arguments"] = "{\"n\":2,\"path\":\"a.txt\"}";
  EXPECT_NE(message_hash(b), message_hash(c));
}

TEST(NormalizeTest, ContentPartsEqualPlainText) {
  json parts = {{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "hello "}}, {{"type", "text"}, {"text", "world"}}})}};
  json plain = {{"role", "user"}, {"content", "hello world"}};
  EXPECT_EQ(message_hash(parts), message_hash(plain));
}

TEST(NormalizeTest, ChainIdentifiesPrefixes) {
  json m = json::array({{{"role", "system"}, {"content", "Current time: 2026-11-29 10:02:35\nrules"}},
                        {{"role", "user"}, {"content", "hi"}}});
  json later = m;
  later[0]["content"] = "Current time: 2026-11-29 10:03:03\nrules";
  later.push_back({{"role", "assistant"}, {"content", "hello"}});
  auto c1 = chain_hashes(m);
  auto c2 = chain_hashes(later);
  ASSERT_EQ(c1.size(), 2U);
  ASSERT_EQ(c2.size(), 3U);
  EXPECT_EQ(c1[1], c2[1]);
  json other = m;
  other[1]["content"] = "bye";
  EXPECT_NE(chain_hashes(other)[1], c1[1]);
  // Role matters: the same text as system vs user is a different message.
  EXPECT_NE(message_hash({{"role", "user"}, {"content", "x"}}), message_hash({{"role", "system"}, {"content", "x"}}));
}

TEST(NormalizeTest, HashIsStable) {
  // Stored hashes must survive restarts and rebuilds: pin a few values.
  EXPECT_EQ(hash64(""), hash64(""));
  EXPECT_NE(hash64("a"), hash64("b"));
  const uint64_t h = hash64("kvgate");
  EXPECT_EQ(h, hash64(std::string("kv") + "gate"));
}

TEST(NormalizeTest, NonObjectsDoNotCrash) {
  EXPECT_EQ(chain_hashes(json("x")).size(), 0U);
  EXPECT_EQ(chain_hashes(json::array({1, nullptr, json::array()})).size(), 3U);
  json weird = {{"role", 5}, {"content", {{"a", 1}}}, {"tool_calls", json::array({1, {{"function", 3}}})}};
  EXPECT_FALSE(canonical_message(weird).empty());
}

}  // namespace
}  // namespace kvgate::session
