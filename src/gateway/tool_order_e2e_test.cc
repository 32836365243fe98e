// Tool schemas reach the real engine with their keys in the order the client wrote them, in
// the turn's request and in the renders kvgate counts it with, on all three wire APIs. The
// engine's template writes a tool's JSON as it receives it, so a schema re-sorted by kvgate
// would put another text into the prompt than the client's (opencode's edit tool: newString
// before oldString) and another token count.
#include <gtest/gtest.h>

#include "testing/gateway_e2e.h"
#include "util/json.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using testing::Engine;
using testing::Front;
using testing::RecordingUpstream;

// Keys out of sorted order at every level the template writes: the tool, its function, the
// schema and its properties.
const char* const kSchema =
    R"({"type":"object","properties":{"oldString":{"type":"string","description":"the text to replace"},)"
    R"("newString":{"type":"string"},"filePath":{"type":"string"}},"required":["filePath","oldString","newString"]})";

class ToolOrderE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = Engine::start({.context = 4096}).release(); }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    upstream_ = std::make_shared<RecordingUpstream>([] { return engine_->endpoint(); });
    front_ = std::make_unique<Front>(upstream_, GatewayOptions{});
  }

  // The engine's own render of a chat body given as text.
  static std::string render(const std::string& body_text) {
    httplib::Client c("127.0.0.1", engine_->endpoint().port);
    c.set_bearer_token_auth(engine_->api_key().c_str());
    auto r = c.Post("/apply-template", body_text, "application/json");
    if (!r || r->status != 200) return "render failed";
    return json::parse(r->body)["prompt"];
  }

  // Every body kvgate sent the engine since call `from` on `path`, as text.
  std::vector<std::string> sent(const std::string& path, size_t from = 0) const {
    std::vector<std::string> out;
    const auto calls = upstream_->calls(path);
    for (size_t i = from; i < calls.size(); ++i) out.push_back(calls[i].text);
    return out;
  }

  // The tools block of a rendered prompt (the template writes each tool's JSON between
  // <tools> and </tools>).
  static std::string tools_block(const std::string& prompt) {
    const size_t from = prompt.find("<tools>"), to = prompt.find("</tools>");
    return from == std::string::npos || to == std::string::npos ? "" : prompt.substr(from, to - from);
  }

  // Sends `body_text` to `route`; then checks that the turn's request to the engine and each
  // render kvgate counted it with carry the tools as `tools_text`, and that the engine renders
  // the tools of the turn's request as it renders those of `chat_text` (a chat body with the
  // client's tools), not as those of the same body with sorted keys.
  void expect_tools_as_written(const std::string& route, const std::string& body_text,
                               const std::string& tools_text, const std::string& chat_text) {
    SCOPED_TRACE(route);
    const size_t chats = upstream_->calls("/v1/chat/completions").size();
    const size_t renders = upstream_->calls("/apply-template").size();
    auto c = front_->client();
    auto r = c.Post(route, body_text, "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    const auto turns = sent("/v1/chat/completions", chats);
    ASSERT_EQ(turns.size(), 1u);
    EXPECT_EQ(util::member_text(turns[0], "tools"), tools_text);
    int counted = 0;  // the template probe's renders carry no tools
    for (const auto& text : sent("/apply-template", renders)) {
      if (!util::member_text(text, "tools")) continue;
      ++counted;
      EXPECT_EQ(util::member_text(text, "tools"), tools_text);
    }
    EXPECT_GT(counted, 0);
    const std::string as_written = tools_block(render(chat_text));
    const std::string sorted = tools_block(render(util::json_text(json::parse(chat_text))));
    ASSERT_FALSE(as_written.empty());
    ASSERT_NE(as_written, sorted) << "the template does not show key order; the test shows nothing";
    EXPECT_EQ(tools_block(render(turns[0])), as_written);
    EXPECT_LT(as_written.find("\"oldString\""), as_written.find("\"newString\"")) << as_written;
  }

  static Engine* engine_;
  std::shared_ptr<RecordingUpstream> upstream_;
  std::unique_ptr<Front> front_;
};
Engine* ToolOrderE2eTest::engine_ = nullptr;

std::string tool_json(const std::string& description) {
  return R"({"type":"function","function":{"name":"edit","description":")" + description +
         R"(","parameters":)" + kSchema + "}}";
}

TEST_F(ToolOrderE2eTest, ChatCompletionsSendTheToolsAsTheClientWroteThem) {
  const std::string tools = "[" + tool_json("Edit a file") + "]";
  const json bias = engine_->word_bias();
  const std::string body = R"({"max_tokens":2,"messages":[{"role":"user","content":"Change the file."}],)"
                           R"("logit_bias":)" +
                           bias.dump() + R"(,"tools":)" + tools + "}";
  const std::string chat =
      R"({"messages":[{"role":"user","content":"Change the file."}],"tools":)" + tools + "}";
  expect_tools_as_written("/v1/chat/completions", body, tools, chat);
}

TEST_F(ToolOrderE2eTest, MessagesAndResponsesSendTheirSchemasAsTheClientWroteThem) {
  // Both APIs' tools become chat function tools written type, function {name, description,
  // parameters}, the schema as the client wrote it. (Two conversations: a turn kvgate
  // recognises as the continuation of a counted one is not counted again.)
  const std::string tools = "[" + tool_json("Edit a file") + "]";
  const std::string chat =
      R"({"messages":[{"role":"user","content":"Change the file."}],"tools":)" + tools + "}";
  expect_tools_as_written(
      "/v1/messages",
      R"({"model":"m","max_tokens":2,"messages":[{"role":"user","content":"Change the file."}],)"
      R"("tools":[{"name":"edit","description":"Edit a file","input_schema":)" +
          std::string(kSchema) + "}]}",
      tools, chat);
  expect_tools_as_written(
      "/v1/responses",
      R"({"model":"m","max_output_tokens":2,"store":false,"input":"Change another file.",)"
      R"("tools":[{"type":"function","name":"edit","description":"Edit a file","parameters":)" +
          std::string(kSchema) + "}]}",
      tools, chat);
}

}  // namespace
}  // namespace kvgate::gateway
