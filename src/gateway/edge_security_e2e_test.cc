// What a hostile client or a web page of another site can send kvgate, against the real engine
// behind a Gateway and its HttpServer wired as `kvgate up` wires them (conversations' engine
// state saved, sessions in a store): ids that are not UTF-8 or hold control characters, Host
// names of a rebound DNS name, JSON bodies of another content type, and answers that list
// a million alternatives per token. Each is refused for its sender only; everyone else is
// served as before (docs/RELIABILITY.md, "Hostile request content").
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "testing/fault_support.h"
#include "testing/gateway_e2e.h"
#include "util/utf8.h"

namespace kvgate::gateway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::RawConnection;
using namespace std::chrono_literals;

struct RawAnswer {
  int status = 0;
  json body;  // null when not JSON
  std::string raw;
};

// One request with exactly these bytes in its head (`headers`: "Name: value\r\n" lines) on a
// connection of its own.
RawAnswer raw_request(uint16_t port, const std::string& method, const std::string& target, const std::string& headers,
                      const std::string& body = "") {
  RawConnection c(port);
  if (!c.ok()) return {};
  c.send(fmt::format("{} {} HTTP/1.1\r\n{}Content-Length: {}\r\nConnection: close\r\n\r\n{}", method, target, headers,
                     body.size(), body));
  RawAnswer a;
  a.raw = c.read_all(120s);
  if (a.raw.rfind("HTTP/1.1 ", 0) != 0) return a;
  a.status = std::atoi(a.raw.c_str() + 9);
  const size_t end = a.raw.find("\r\n\r\n");
  if (end != std::string::npos) a.body = json::parse(a.raw.substr(end + 4), nullptr, false);
  if (a.body.is_discarded()) a.body = nullptr;
  return a;
}

json with(json j, const std::string& key, json value) {
  j[key] = std::move(value);
  return j;
}

std::string error_text(const json& body) {
  return body.is_object() && body.contains("error") ? util::json_text(body["error"]) : std::string();
}

// The error's param (OpenAI's shape); empty when there is none.
std::string param_of(const json& body) {
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return "";
  const json& param = body["error"]["param"];
  return param.is_string() ? param.get<std::string>() : "";
}

class EdgeSecurityE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The bias that keeps the random-weight model to plain words goes on the engine's command
    // line: the Messages and Responses formats have no logit_bias field.
    json bias = testing::Engine::start({.context = 2048})->word_bias();
    dir_ = fs::temp_directory_path() / fmt::format("kvgate-edge-security-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "kv");
    std::vector<std::string> args = testing::word_bias_flags(bias);
    // One slot, no host prompt cache: each conversation's turn saves the previous one's state.
    for (const char* a : {"--cache-ram", "0", "--slot-save-path"}) args.emplace_back(a);
    args.push_back((dir_ / "kv").string());
    engine_ = testing::Engine::start({.context = 8192, .slots = 1, .args = args}).release();
    testing::set_default_word_bias(bias);
  }
  static void TearDownTestSuite() {
    delete engine_;
    fs::remove_all(dir_);
  }

  // A gateway as `kvgate up` runs it: engine state saved (the folder emptied first), sessions
  // in a store of its own.
  static std::unique_ptr<testing::Front> front(http::HttpServerOptions http = {}) {
    for (const auto& entry : fs::directory_iterator(dir_ / "kv")) fs::remove_all(entry.path());
    GatewayOptions o;
    o.kv.dir = dir_ / "kv";
    o.kv.disk_budget_bytes = 1ULL << 30;
    o.kv.identity = {{"test", "edge-security"}};
    auto f = std::make_unique<testing::Front>([] { return engine_->endpoint(); }, o, std::move(http));
    EXPECT_TRUE(f->gateway().open_store(dir_ / fmt::format("sessions-{}.db", ++stores_)).ok());
    return f;
  }

  static json chat(const std::string& text, int max_tokens = 4) {
    return testing::plain_chat(json::array({{{"role", "user"}, {"content", text}}}), max_tokens);
  }
  static json message(const std::string& text) {
    return {{"model", "m"}, {"max_tokens", 4}, {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
  }
  static json response(const std::string& text) { return {{"model", "m"}, {"input", text}, {"max_output_tokens", 4}}; }

  static testing::Engine* engine_;
  static fs::path dir_;
  static int stores_;
};
testing::Engine* EdgeSecurityE2eTest::engine_ = nullptr;
fs::path EdgeSecurityE2eTest::dir_;
int EdgeSecurityE2eTest::stores_ = 0;

// Another client, after the hostile one: a chat turn of a conversation of its own (which takes
// the slot and so saves what the slot held), the status, metrics and sessions.
void others_are_served(testing::Front& f, const std::string& after, int n) {
  auto c = f.client();
  const auto turn = testing::post_json(
      c, "/v1/chat/completions",
      testing::plain_chat(json::array({{{"role", "user"}, {"content", fmt::format("Other client {} here.", n)}}}), 4),
      {{"X-Session-Id", fmt::format("other-{}", n)}});
  EXPECT_EQ(turn.status, 200) << "after " << after << ": " << turn.raw.substr(0, 300);
  for (const char* path : {"/kvgate/v1/status", "/metrics", "/kvgate/v1/sessions", "/health"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << "after " << after << ": " << path << " " << r->body.substr(0, 300);
  }
}

TEST_F(EdgeSecurityE2eTest, HostileIdsAre400ForTheirSenderOnly) {
  auto f = front();
  const std::string bad = "\xff\xfe-bad";  // the reported header: not UTF-8
  const std::string json_type = "Host: 127.0.0.1\r\nContent-Type: application/json\r\n";
  struct Case {
    std::string name, method, target, headers, body, param;
  };
  const std::vector<Case> cases = {
      {"chat, X-Session-Id not UTF-8", "POST", "/v1/chat/completions", json_type + "X-Session-Id: " + bad + "\r\n",
       chat("hello").dump(), "X-Session-Id"},
      {"messages, X-Session-Id not UTF-8", "POST", "/v1/messages", json_type + "X-Session-Id: " + bad + "\r\n",
       message("hello").dump(), "X-Session-Id"},
      {"responses, X-Session-Id not UTF-8", "POST", "/v1/responses", json_type + "X-Session-Id: " + bad + "\r\n",
       response("hello").dump(), "X-Session-Id"},
      {"chat, X-Session-Id of 1025 bytes", "POST", "/v1/chat/completions",
       json_type + "X-Session-Id: " + std::string(1025, 's') + "\r\n", chat("hello").dump(), "X-Session-Id"},
      {"chat, user with a control character", "POST", "/v1/chat/completions", json_type,
       with(chat("hello"), "user", "u\x01x").dump(), "user"},
      {"chat, prompt_cache_key with an escape", "POST", "/v1/chat/completions", json_type,
       with(chat("hello"), "prompt_cache_key", "\x1b[2J").dump(), "prompt_cache_key"},
      {"chat, user of 1025 bytes", "POST", "/v1/chat/completions", json_type,
       with(chat("hello"), "user", std::string(1025, 'u')).dump(), "user"},
      {"messages, metadata.user_id with NUL", "POST", "/v1/messages", json_type,
       with(message("hello"), "metadata", {{"user_id", std::string("a\0b", 3)}}).dump(),
       "metadata.user_id"},
      {"responses, prompt_cache_key with U+0085", "POST", "/v1/responses", json_type,
       with(response("hello"), "prompt_cache_key", "k\xc2\x85").dump(), "prompt_cache_key"},
      {"responses, previous_response_id with a newline", "POST", "/v1/responses", json_type,
       with(response("hello"), "previous_response_id", "resp_\nx").dump(), "previous_response_id"},
      {"GET /v1/responses/ID not UTF-8", "GET", "/v1/responses/%ff%fe", "Host: 127.0.0.1\r\n", "", "path"},
      {"GET /kvgate/v1/sessions/ID not UTF-8", "GET", "/kvgate/v1/sessions/%ff", "Host: 127.0.0.1\r\n", "", "path"},
      {"compact a session ID with a control character", "POST", "/kvgate/v1/sessions/a%01b/compact", json_type, "",
       "path"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const RawAnswer a = raw_request(f->port(), c.method, c.target, c.headers, c.body);
    EXPECT_EQ(a.status, 400) << c.name << ": " << a.raw.substr(0, 400);
    const std::string error = error_text(a.body);
    EXPECT_TRUE(util::is_valid_utf8(a.raw)) << c.name;
    EXPECT_NE(error.find("without control characters"), std::string::npos) << c.name << ": " << error;
    EXPECT_NE(error.find(c.param), std::string::npos) << c.name << ": " << error;  // Anthropic's shape has no param
    if (!c.target.starts_with("/v1/messages")) {
      EXPECT_EQ(param_of(a.body), c.param) << c.name << ": " << error;
    }
    others_are_served(*f, c.name, ++n);
  }
  // Nothing of the hostile requests was kept: no session, no saved state names them.
  auto c = f->client();
  auto sessions = c.Get("/kvgate/v1/sessions");
  ASSERT_TRUE(sessions);
  const json list = json::parse(sessions->body)["data"];
  EXPECT_EQ(list.size(), cases.size()) << "one session per other client, none for the hostile ones";
  for (const auto& s : list) EXPECT_TRUE(s["id"].get<std::string>().starts_with("open~other-")) << s["id"];
  // Every saved state has its record, and every record names another client's session (before:
  // the hostile session's state file stayed without one, its record failing to be written).
  size_t states = 0, records = 0;
  for (const auto& entry : fs::directory_iterator(dir_ / "kv")) {
    const std::string name = entry.path().filename().string();
    EXPECT_FALSE(name.starts_with("tmp-")) << name;
    if (entry.path().extension() != ".json") {
      ++states;
      continue;
    }
    ++records;
    std::ifstream in(entry.path());
    const json record = json::parse(in, nullptr, false);
    ASSERT_TRUE(record.is_object()) << name;
    EXPECT_TRUE(record.value("session", "").starts_with("open~other-")) << name << ": " << record.value("session", "");
  }
  EXPECT_EQ(states, records);
  EXPECT_GT(records, 0u) << "the other clients' states were saved as the slot changed hands";
}

// DNS rebinding: a page of evil.example whose name came to resolve to 127.0.0.1 sends its
// requests with Host: evil.example. Only the names this gateway is known by are answered.
TEST_F(EdgeSecurityE2eTest, HostMustBeANameThisGatewayIsKnownBy) {
  auto f = front();
  const std::string body = chat("hello").dump();
  auto post = [&](testing::Front& gw, const std::string& host) {
    return raw_request(gw.port(), "POST", "/v1/chat/completions",
                       fmt::format("Host: {}\r\nContent-Type: application/json\r\n", host), body);
  };
  const std::string port = std::to_string(f->port());
  const RawAnswer evil = post(*f, "evil.example:" + port);
  EXPECT_EQ(evil.status, 403) << evil.raw.substr(0, 400);
  EXPECT_NE(error_text(evil.body).find("--allow-host"), std::string::npos) << evil.raw.substr(0, 400);
  for (const std::string& host : {"127.0.0.1:" + port, "localhost:" + port, std::string("LOCALHOST"), "[::1]:" + port}) {
    const RawAnswer ok = post(*f, host);
    EXPECT_EQ(ok.status, 200) << host << ": " << ok.raw.substr(0, 300);
  }
  // Names the operator adds (--allow-host), and the list opened deliberately ('*').
  auto models = [](testing::Front& gw, const std::string& host) {
    return raw_request(gw.port(), "GET", "/v1/models", fmt::format("Host: {}\r\n", host)).status;
  };
  auto named = front({.allowed_hosts = {"gpu-box.lan"}});
  EXPECT_EQ(models(*named, "gpu-box.lan:" + std::to_string(named->port())), 200);
  EXPECT_EQ(models(*named, "evil.example"), 403);
  auto any = front({.allowed_hosts = {"*"}});
  EXPECT_EQ(models(*any, "evil.example:" + std::to_string(any->port())), 200);
}

// A page of another site can POST a body without asking first only as text/plain, a form or
// with no type at all; kvgate's JSON routes refuse those (415) instead of running them.
TEST_F(EdgeSecurityE2eTest, JsonRoutesRefuseBodiesOfOtherTypes) {
  auto f = front();
  auto post = [&](const std::string& path, const std::string& headers, const std::string& body) {
    return raw_request(f->port(), "POST", path, "Host: 127.0.0.1\r\nX-Session-Id: content-type\r\n" + headers, body);
  };
  const std::string chat_body = chat("hello").dump();
  const std::vector<std::pair<std::string, std::string>> routes = {
      {"/v1/chat/completions", chat_body},
      {"/v1/completions", R"({"prompt":"hello","max_tokens":2})"},
      {"/v1/messages", message("hello").dump()},
      {"/v1/messages/count_tokens", message("hello").dump()},
      {"/v1/responses", response("hello").dump()},
      {"/v1/responses/input_tokens", response("hello").dump()},
      {"/tokenize", R"({"content":"hello"})"},
      {"/detokenize", R"({"tokens":[1,2]})"},
      {"/apply-template", R"({"messages":[{"role":"user","content":"hello"}]})"},
      {"/kvgate/v1/sessions/open~content-type/compact", "{}"},
  };
  for (const auto& [path, body] : routes) {
    for (const char* type : {"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                             "multipart/form-data; boundary=x"}) {
      const RawAnswer a = post(path, fmt::format("Content-Type: {}\r\n", type), body);
      EXPECT_EQ(a.status, 415) << path << " " << type << ": " << a.raw.substr(0, 300);
      EXPECT_NE(error_text(a.body).find("application/json"), std::string::npos) << a.raw.substr(0, 300);
    }
    // A browser always sends Origin with a POST: then the type must be there.
    EXPECT_EQ(post(path, "Origin: https://evil.example\r\n", body).status, 415) << path;
  }
  // Nothing of them ran: no conversation was made.
  EXPECT_EQ(f->client().Get("/kvgate/v1/sessions/open~content-type")->status, 404);
  for (const char* type : {"application/json", "application/json; charset=utf-8", "Application/JSON",
                           "application/vnd.kvgate+json"}) {
    EXPECT_EQ(post("/v1/chat/completions", fmt::format("Content-Type: {}\r\n", type), chat_body).status, 200) << type;
  }
  // No type from a client that is no browser (Python's requests.post(data=...)): accepted.
  EXPECT_EQ(post("/v1/chat/completions", "", chat_body).status, 200);
  EXPECT_EQ(post("/tokenize", "", R"({"content":"hello"})").status, 200);
}

// Alternatives per token: at most 20, as OpenAI's API allows (a million made the engine list
// a million per generated token).
TEST_F(EdgeSecurityE2eTest, AlternativesPerTokenAreBounded) {
  auto f = front();
  auto c = f->client();
  auto asked = [](json body, const std::string& key, json value) {
    body[key] = std::move(value);
    return body;
  };
  json logprobs = asked(chat("hello", 8), "logprobs", true);
  for (const auto& [path, body, param] : std::vector<std::tuple<std::string, json, std::string>>{
           {"/v1/chat/completions", asked(logprobs, "top_logprobs", 1000000), "top_logprobs"},
           {"/v1/chat/completions", asked(logprobs, "top_logprobs", 21), "top_logprobs"},
           {"/v1/chat/completions", asked(logprobs, "top_logprobs", -1), "top_logprobs"},
           {"/v1/chat/completions", asked(chat("hello", 8), "n_probs", 1000000), "n_probs"},
           {"/v1/completions", json{{"prompt", "hello"}, {"max_tokens", 8}, {"n_probs", 1000000}}, "n_probs"},
           {"/v1/completions", json{{"prompt", "hello"}, {"max_tokens", 8}, {"logprobs", 1000000}}, "logprobs"},
       }) {
    const auto a = testing::post_json(c, path, body);
    EXPECT_EQ(a.status, 400) << path << " " << param << ": " << a.raw.substr(0, 300);
    EXPECT_EQ(param_of(a.body), param) << a.raw.substr(0, 300);
    EXPECT_NE(error_text(a.body).find("from 0 to 20"), std::string::npos) << a.raw.substr(0, 300);
  }
  const auto five = testing::post_json(c, "/v1/chat/completions", asked(logprobs, "top_logprobs", 5));
  ASSERT_EQ(five.status, 200) << five.raw.substr(0, 300);
  const json& tokens = five.body["choices"][0]["logprobs"]["content"];
  ASSERT_TRUE(tokens.is_array()) << five.raw.substr(0, 600);
  EXPECT_GT(tokens.size(), 0u);
  for (const auto& t : tokens) EXPECT_EQ(t["top_logprobs"].size(), 5u) << t;
  const auto twenty = testing::post_json(c, "/v1/chat/completions", asked(logprobs, "top_logprobs", 20));
  EXPECT_EQ(twenty.status, 200) << twenty.raw.substr(0, 300);
}

// The probe's bodies that froze or stalled the engine (a 50,000-entry enum, a 20,000-
// alternative grammar) or held other clients while counted (20,000 tools, a 150,000-entry
// logit_bias): refused before the engine or the counting sees them, on every route that takes
// them, while another client's turn goes on beside them; a schema within the bounds works.
TEST_F(EdgeSecurityE2eTest, CostlySchemasGrammarsAndCountsAreRefusedBeforeTheEngine) {
  auto f = front();
  auto c = f->client();
  json values = json::array();
  for (int i = 0; i < 50000; ++i) values.push_back(fmt::format("value-{:06d}", i));
  const json enum_format = {{"type", "json_schema"},
                            {"json_schema", {{"name", "x"}, {"schema", {{"type", "string"}, {"enum", values}}}}}};
  std::string grammar = "root ::= \"a0\"";
  for (int i = 1; i < 20000; ++i) grammar += fmt::format(" | \"a{}\"", i);
  json tools = json::array(), bias = json::object();
  for (int i = 0; i < 20000; ++i) tools.push_back({{"type", "function"}, {"function", {{"name", fmt::format("t{}", i)}}}});
  for (int i = 0; i < 150000; ++i) bias[std::to_string(i)] = 1;
  const json completion = {{"prompt", "hello"}, {"max_tokens", 4}};
  struct Case {
    std::string path;
    json body;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", with(chat("hello"), "response_format", enum_format), 413, "response_format"},
      {"/v1/chat/completions", with(chat("hello"), "grammar", grammar), 413, "grammar"},
      {"/v1/completions", with(completion, "grammar", grammar), 413, "grammar"},
      {"/v1/completions", with(completion, "json_schema", enum_format["json_schema"]["schema"]), 413, "json_schema"},
      {"/v1/chat/completions", with(chat("hello"), "tools", tools), 400, "tools"},
      {"/v1/chat/completions", with(chat("hello"), "logit_bias", bias), 400, "logit_bias"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& k = cases[i];
    std::optional<testing::JsonAnswer> beside;
    std::thread other([&] {
      auto oc = f->client();
      beside = testing::post_json(oc, "/v1/chat/completions", chat(fmt::format("Beside case {}.", i)),
                                  {{"X-Session-Id", fmt::format("beside-{}", i)}});
    });
    const auto t0 = std::chrono::steady_clock::now();
    const auto a = testing::post_json(c, k.path, k.body);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    other.join();
    EXPECT_EQ(a.status, k.status) << k.path << " " << k.param << ": " << a.raw.substr(0, 300);
    EXPECT_EQ(param_of(a.body), k.param) << a.raw.substr(0, 300);
    EXPECT_NE(error_text(a.body).find("limit of"), std::string::npos) << a.raw.substr(0, 300);
    EXPECT_LT(s, 10.0) << k.path << " " << k.param << ": refused only after " << s << " s";
    ASSERT_TRUE(beside.has_value());
    EXPECT_EQ(beside->status, 200) << beside->raw.substr(0, 300);
  }
  // Within the bounds: a 2-entry enum is the engine's to honour.
  json small = enum_format;
  small["json_schema"]["schema"]["enum"] = json::array({"yes", "no"});
  const auto ok = testing::post_json(c, "/v1/chat/completions", with(chat("hello", 8), "response_format", small));
  ASSERT_EQ(ok.status, 200) << ok.raw.substr(0, 300);
  std::string content = ok.body["choices"][0]["message"].value("content", "");
  content.erase(0, content.find_first_not_of(" \n\t"));  // the schema's grammar allows blanks around
  content.erase(content.find_last_not_of(" \n\t") + 1);
  // The grammar allows only these (max_tokens may cut one short).
  EXPECT_TRUE(!content.empty() && (std::string("\"yes\"").starts_with(content) || std::string("\"no\"").starts_with(content)))
      << content;
  others_are_served(*f, "the costly requests", 1);
}

}  // namespace
}  // namespace kvgate::gateway
