// The official SDKs read what the stream encoders write: each encoded stream is written to a
// file and parsed by tests/npm/wire_stream_check.mjs with the Anthropic SDK's MessageStream and
// the OpenAI SDK's Responses accumulator (the code Claude Code and OpenAI-SDK clients run);
// what they accumulate must be the non-streamed answer. Needs node and tests/npm/node_modules
// (scripts/setup.sh installs both); skips without them.
#include <filesystem>
#include <fstream>
#include <mutex>

#include <gtest/gtest.h>
#include <unistd.h>

#include "testing/paths.h"
#include "util/subprocess.h"
#include "wire/anthropic_reply.h"
#include "wire/anthropic_stream.h"
#include "wire/responses_reply.h"
#include "wire/responses_stream.h"
#include "testing/wire_support.h"

namespace kvgate::wire {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kNpm = fs::path(kvgate::testing::source_dir()) / "tests" / "npm";

// The SDK's reading of each stream: {"final": …} or {"thrown": …}.
std::vector<ClientJson> sdk_read(const std::string& format, const std::vector<std::string>& streams) {
  const fs::path dir = fs::temp_directory_path() / ("kvgate_wire_sdk_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::string> argv = {"/usr/bin/env", "node", (kNpm / "wire_stream_check.mjs").string(), format};
  for (size_t i = 0; i < streams.size(); ++i) {
    const fs::path file = dir / (format + std::to_string(i) + ".sse");
    std::ofstream(file, std::ios::binary) << streams[i];
    argv.push_back(file.string());
  }
  std::string out;
  std::mutex mu;
  auto proc = util::Subprocess::spawn({.argv = argv, .on_line = [&](std::string_view line) {
                                         std::lock_guard lock(mu);
                                         out.append(line);
                                       }});
  EXPECT_TRUE(proc.ok());
  if (proc.ok()) {
    (*proc)->wait_for(std::chrono::seconds(120));
    (*proc)->stop();
  }
  fs::remove_all(dir);
  std::lock_guard lock(mu);
  ClientJson results = ClientJson::parse(out, nullptr, false);
  EXPECT_TRUE(results.is_array() && results.size() == streams.size()) << out.substr(0, 2000);
  if (!results.is_array()) return {};
  return std::vector<ClientJson>(results.begin(), results.end());
}

std::string joined(const std::vector<std::string>& events) {
  std::string s;
  for (const std::string& e : events) s += e;
  return s;
}

class SdkStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kNpm / "node_modules" / "@anthropic-ai" / "sdk") ||
        !fs::exists(kNpm / "node_modules" / "openai")) {
      GTEST_SKIP() << "tests/npm/node_modules is missing (scripts/setup.sh installs it with npm ci)";
    }
    if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  }

  // Random replies in random pieces, calls in the engine's order (the SDKs and the Anthropic
  // API build blocks in the order they start).
  static std::vector<testing::ReplySpec> replies() {
    std::mt19937 rng(5);
    std::vector<testing::ReplySpec> out;
    for (int i = 0; i < 40; ++i) out.push_back(testing::random_reply(rng));
    return out;
  }
};

TEST_F(SdkStreamTest, AnthropicSdkAccumulatesTheNonStreamedMessage) {
  std::mt19937 rng(17);
  const auto specs = replies();
  std::vector<std::string> streams;
  for (size_t i = 0; i < specs.size(); ++i) {
    testing::ChunkOptions options;
    options.noise = i % 2 == 0;
    options.usage_in_finish = i % 3 == 0;
    MessagesStream s("claude-test", message_id(specs[i].id));
    std::vector<std::string> events = testing::encode(s, testing::chunks_for(specs[i], rng, options));
    events.insert(events.begin() + 1, MessagesStream::ping());
    streams.push_back(joined(events));
  }
  const auto results = sdk_read("anthropic", streams);
  ASSERT_EQ(results.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSERT_FALSE(results[i].contains("thrown")) << results[i]["thrown"];
    const ClientJson& got = results[i]["final"];
    const ClientJson want = chat_to_message(testing::chat_response(specs[i]), "claude-test");
    for (const char* key :
         {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}) {
      EXPECT_EQ(got[key], want[key]) << "reply " << i << ", " << key;
    }
  }
}

TEST_F(SdkStreamTest, OpenAiSdkAccumulatesTheNonStreamedResponse) {
  std::mt19937 rng(19);
  const auto specs = replies();
  auto conversion = responses_to_chat(ClientJson::parse(R"({"model": "gpt-test", "input": "q", "stream": true,
    "instructions": "I", "tools": [{"type": "function", "name": "tool_0"}]})"),
                                      json::array());
  ASSERT_TRUE(conversion.ok());
  std::vector<std::string> streams;
  for (size_t i = 0; i < specs.size(); ++i) {
    testing::ChunkOptions options;
    options.noise = i % 2 == 1;
    options.usage_in_finish = i % 3 == 1;
    ResponsesStream s(*conversion, "resp_" + std::to_string(i), 1750000000);
    streams.push_back(joined(testing::encode(s, testing::chunks_for(specs[i], rng, options))));
  }
  const auto results = sdk_read("responses", streams);
  ASSERT_EQ(results.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSERT_FALSE(results[i].contains("thrown")) << results[i]["thrown"];
    const ClientJson want = chat_to_response(testing::chat_response(specs[i]), *conversion,
                                             "resp_" + std::to_string(i), 1750000000);
    const ClientJson& got = results[i]["final"];
    for (const auto& [key, value] : want.items()) EXPECT_EQ(got[key], value) << "reply " << i << ", " << key;
    // The items the SDK built from the item events, before the terminal event replaced them.
    EXPECT_EQ(results[i]["streamed_output"], want["output"]) << "reply " << i;
  }
}

// The chunks the pinned engine streamed (tests/fixtures/wire), encoded and read by the SDKs.
TEST_F(SdkStreamTest, RecordedEngineStreamsReadByTheSdks) {
  const auto fixtures = testing::recorded_fixtures();
  std::vector<std::string> names, messages, responses;
  std::vector<ResponsesConversion> conversions;
  for (const auto& [name, f] : fixtures) {
    names.push_back(name);
    MessagesStream m("m", "msg_" + name);
    messages.push_back(joined(testing::encode(m, f["chunks"])));
    auto c = responses_to_chat(ClientJson(f["engine_responses"]["request"]), json::array());
    ASSERT_TRUE(c.ok());
    ResponsesStream r(*c, "resp_" + name, 1);
    responses.push_back(joined(testing::encode(r, f["chunks"])));
    conversions.push_back(std::move(*c));
  }
  const auto read_messages = sdk_read("anthropic", messages);
  const auto read_responses = sdk_read("responses", responses);
  ASSERT_EQ(read_messages.size(), names.size());
  ASSERT_EQ(read_responses.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const json& f = fixtures.at(names[i]);
    ASSERT_FALSE(read_messages[i].contains("thrown")) << read_messages[i]["thrown"];
    ASSERT_FALSE(read_responses[i].contains("thrown")) << read_responses[i]["thrown"];
    // What the SDK accumulated from the engine's stream is what the engine answered whole
    // (the second request found its prompt in the cache; tool-call ids are per request).
    const ClientJson whole = chat_to_message(f["response"], "m");
    const ClientJson& got = read_messages[i]["final"];
    EXPECT_EQ(got["stop_reason"], whole["stop_reason"]);
    EXPECT_EQ(got["stop_sequence"], whole["stop_sequence"]);
    EXPECT_EQ(got["usage"]["output_tokens"], whole["usage"]["output_tokens"]);
    ASSERT_EQ(got["content"].size(), whole["content"].size());
    for (size_t k = 0; k < whole["content"].size(); ++k) {
      const ClientJson& block = whole["content"][k];
      EXPECT_EQ(got["content"][k]["type"], block["type"]);
      const bool cut_call = block["type"] == "tool_use" && whole["stop_reason"] == "max_tokens";
      for (const char* key : {"text", "thinking", "input", "name"}) {
        if (block.contains(key) && !(cut_call && std::string_view(key) == "input")) {
          EXPECT_EQ(got["content"][k][key], block[key]) << key;
        }
      }
    }
    const ClientJson want = chat_to_response(f["response"], conversions[i], "resp_" + names[i], 1);
    const ClientJson& response = read_responses[i]["final"];
    EXPECT_EQ(response["status"], want["status"]);
    ASSERT_EQ(response["output"].size(), want["output"].size());
    for (size_t k = 0; k < want["output"].size(); ++k) {
      ClientJson a = response["output"][k];
      ClientJson b = want["output"][k];
      a.erase("call_id");
      b.erase("call_id");
      EXPECT_EQ(a, b);
    }
  }
}

TEST_F(SdkStreamTest, SdksSurfaceFailures) {
  auto conversion = responses_to_chat(ClientJson::parse(R"({"input": "q"})"), json::array());
  ASSERT_TRUE(conversion.ok());
  ResponsesStream failing(*conversion, "resp_f", 1);
  std::vector<std::string> events = failing.start();
  for (std::string& e :
       failing.on_chunk(json::parse(R"({"choices": [{"index": 0, "delta": {"content": "par"}}]})"))) {
    events.push_back(std::move(e));
  }
  for (std::string& e : failing.failed(
           WireError{.status = 503, .type = "server_error", .message = "engine lost", .param = ""})) {
    events.push_back(std::move(e));
  }
  const auto responses = sdk_read("responses", {joined(events)});
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(responses[0]["final"]["status"], "failed") << responses[0].dump();
  EXPECT_EQ(responses[0]["final"]["error"]["message"], "engine lost");

  MessagesStream broken("m", "msg_e");
  const std::string anthropic =
      broken.start() + MessagesStream::error("overloaded_error", "engine restarting");
  const auto messages = sdk_read("anthropic", {anthropic});
  ASSERT_EQ(messages.size(), 1u);
  ASSERT_TRUE(messages[0].contains("thrown")) << messages[0].dump();
  EXPECT_NE(messages[0]["thrown"].get<std::string>().find("engine restarting"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::wire
