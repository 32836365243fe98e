// The status page in a real browser: `kvgate up` (the real binary, the pinned llama-server,
// a synthesized model, an API key) while a recorded agent trace is replayed through it, and
// headless Chromium (Debian's `chromium`) loading the page. The page's panels must show what
// GET /kvgate/v1/status and /kvgate/v1/sessions say; the prefix-break inspector must name the
// message and cause of a deliberately edited history; markup sent in a conversation must stay
// text; and without the key the page shows only its login form while the data routes refuse.
//
// Chromium runs with --dump-dom: the page's DOM after its script ran (virtual time lets its
// polls complete), read through the data-k / data-v hooks the page puts on every value.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "bench/trace.h"
#include "engine/pinned.h"
#include "gguf/file.h"
#include "gguf/synth.h"
#include "testing/engines_under_test.h"
#include "testing/eventually.h"
#include "testing/paths.h"
#include "testing/up_test_support.h"
#include "util/net.h"
#include "util/subprocess.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kKey = "page-test-key";

std::string chromium_path() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (fs::exists(p)) return p;
  }
  return {};
}

// Undoes the HTML serializer's escapes in text and attribute values.
std::string unescape(std::string s) {
  const std::pair<const char*, const char*> kEntities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&nbsp;", "\xC2\xA0"}, {"&amp;", "&"}};
  for (const auto& [from, to] : kEntities) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + std::strlen(to))) {
      s.replace(at, std::strlen(from), to);
    }
  }
  return s;
}

std::string regex_escape(const std::string& s) { return std::regex_replace(s, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)"); }

// The raw value (data-v) of the first element with data-k="key" after `from` in the DOM.
std::optional<std::string> value_of(const std::string& dom, const std::string& key, size_t from = 0) {
  std::smatch m;
  const std::regex re("data-k=\"" + regex_escape(key) + "\" data-v=\"([^\"]*)\"");
  const std::string rest = dom.substr(std::min(from, dom.size()));
  if (!std::regex_search(rest, m, re)) return std::nullopt;
  return unescape(m[1]);
}

// The text of the first element with data-k="key" (no nested elements).
std::optional<std::string> text_of(const std::string& dom, const std::string& key) {
  std::smatch m;
  const std::regex re("data-k=\"" + regex_escape(key) + "\"[^>]*>([^<]*)<");
  if (!std::regex_search(dom, m, re)) return std::nullopt;
  return unescape(m[1]);
}

class StatusPageE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    chromium_ = chromium_path();
    if (chromium_.empty()) return;
    dir_ = fs::temp_directory_path() / fmt::format("kvgate_status_page_{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto vocab_path = engine::vocab_file("qwen2");
    ASSERT_TRUE(vocab_path.ok()) << vocab_path.error().message();
    auto vocab = gguf::File::open(*vocab_path);
    ASSERT_TRUE(vocab.ok());
    const fs::path model = dir_ / "m.gguf";
    ASSERT_TRUE(gguf::synthesize(*gguf::synth_defaults("qwen3"), &*vocab, model).ok());
    auto port = util::pick_free_port();
    ASSERT_TRUE(port.ok());
    port_ = *port;
    up_ = new testing::UpProcess({model.string(), "--listen", fmt::format("127.0.0.1:{}", port_), "--ctx",
                                  "8192", "--threads", testing::engine_threads(), "--api-key", kKey,
                                  "--state-dir", "none", "--log-dir", (dir_ / "logs").string(),
                                  "--prefill-report", prefill_fixture()});
    ASSERT_TRUE(up_->wait_ready()) << up_->output();
  }
  static void TearDownTestSuite() {
    delete up_;
    up_ = nullptr;
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (chromium_.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs Debian's chromium)";
    ASSERT_NE(up_, nullptr);
  }

  static std::string prefill_fixture() {
    return std::string(kvgate::testing::source_dir()) + "/tests/fixtures/bench/prefill-cliff.json";
  }
  static std::string url(const std::string& path) { return fmt::format("http://127.0.0.1:{}{}", port_, path); }

  // The page's DOM after `budget_ms` of virtual time.
  static std::string dump_dom(const std::string& path, int budget_ms = 6000) {
    const fs::path profile = dir_ / fmt::format("chromium-{}", ++dumps_);
    const std::string cmd = fmt::format(
        "{} --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --user-data-dir={} "
        "--virtual-time-budget={} --dump-dom {} 2>/dev/null",
        chromium_, util::shell_quote(profile.string()), budget_ms, util::shell_quote(url(path)));
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[65536];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      ::pclose(p);
    }
    return out;
  }

  static httplib::Client client(bool with_key = true) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    c.set_decompress(false);  // sizes as sent
    if (with_key) c.set_bearer_token_auth(kKey);
    return c;
  }
  static json get_json(const std::string& path) {
    auto r = client().Get(path);
    if (!r || r->status != 200) return nullptr;
    return json::parse(r->body, nullptr, false);
  }
  static std::optional<json> chat(const json& messages, const std::string& session = "") {
    auto c = client();
    httplib::Headers h;
    if (!session.empty()) h.emplace("X-Session-Id", session);
    auto r = c.Post("/v1/chat/completions", h, json{{"messages", messages}, {"max_tokens", 8}}.dump(),
                    "application/json");
    if (!r || r->status != 200) return std::nullopt;
    auto j = json::parse(r->body, nullptr, false);
    if (j.is_discarded() || !j.contains("choices")) return std::nullopt;
    return j["choices"][0]["message"];
  }

  static inline std::string chromium_;
  static inline fs::path dir_;
  static inline uint16_t port_ = 0;
  static inline testing::UpProcess* up_ = nullptr;
  static inline int dumps_ = 0;
};

TEST_F(StatusPageE2eTest, PanelsShowWhatTheStatusSaysWhileATraceReplays) {
  auto trace = bench::load_trace(fs::path(kvgate::testing::source_dir()) / "tests/fixtures/traces/agent-timestamp.jsonl.zst", 8);
  ASSERT_TRUE(trace.ok()) << trace.error().message();
  std::atomic<int> failed{0};
  std::atomic<int> sent{0};
  std::jthread replay([&] {
    for (const auto& turn : trace->turns) {
      if (!chat(turn["messages"])) ++failed;
      ++sent;
    }
  });
  // While the replay runs: the page is up and reads live data.
  ASSERT_TRUE(testing::eventually([&] { return sent.load() >= 2; }, std::chrono::minutes(5)));
  const std::string during = dump_dom("/?key=" + std::string(kKey), 3000);
  replay.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_NE(during.find("data-state=\"ready\""), std::string::npos) << during.substr(0, 2000);

  // Quiet now: the page and the routes must agree.
  const json status = get_json("/kvgate/v1/status");
  const json sessions = get_json("/kvgate/v1/sessions");
  ASSERT_TRUE(status.is_object());
  ASSERT_TRUE(sessions.is_object());
  const std::string dom = dump_dom("/?key=" + std::string(kKey));
  ASSERT_NE(dom.find("data-state=\"ready\""), std::string::npos) << dom.substr(0, 2000);
  auto raw = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.is_null() ? std::string() : v.dump(); };
  for (const auto& [key, ptr] : std::vector<std::pair<std::string, std::string>>{
           {"engine.state", "/engine/state"},
           {"engine.fork", "/engine/fork"},
           {"engine.restarts", "/engine/restarts"},
           {"engine.pid", "/engine/pid"},
           {"memory.planned_total_bytes", "/memory/planned_total_bytes"},
           {"memory.n_ctx", "/memory/n_ctx"},
           {"memory.n_ctx_slot", "/memory/n_ctx_slot"},
           {"memory.slots", "/memory/slots"},
           {"queue.admitted", "/queue/admitted"},
           {"queue.refused_queue_full", "/queue/refused_queue_full"},
           {"metrics.prompt_tokens", "/metrics/prompt_tokens"},
           {"metrics.cached_tokens", "/metrics/cached_tokens"},
           {"sessions", "/sessions"}}) {
    EXPECT_EQ(value_of(dom, key), raw(status.at(json::json_pointer(ptr)))) << key;
  }
  EXPECT_EQ(value_of(dom, "engine.state"), "ready");
  EXPECT_EQ(status["queue"]["admitted"], trace->turns.size());
  // Memory: each component's planned and reported bytes.
  for (const auto& c : status["memory"]["components"]) {
    const size_t row = dom.find(fmt::format("data-component=\"{}\"", c["name"].get<std::string>()));
    ASSERT_NE(row, std::string::npos) << c.dump();
    EXPECT_EQ(value_of(dom, "planned_bytes", row), raw(c["planned_bytes"])) << c.dump();
    EXPECT_EQ(value_of(dom, "reported_bytes", row), raw(c["reported_bytes"])) << c.dump();
  }
  EXPECT_TRUE(status["memory"]["components"][1]["reported_bytes"].is_number());  // the KV the log reported
  // Startup checks: every verified line is an "ok".
  const auto& verified = status["engine"]["startup_checks"]["verified"];
  size_t oks = 0;
  for (size_t at = dom.find("data-check=\"ok\""); at != std::string::npos; at = dom.find("data-check=\"ok\"", at + 1)) ++oks;
  EXPECT_EQ(oks, verified.size());
  EXPECT_GT(oks, 0u);
  // Conversations: one row per session with its figures.
  ASSERT_FALSE(sessions["data"].empty());
  for (const auto& s : sessions["data"]) {
    const size_t row = dom.find(fmt::format("data-session=\"{}\"", s["id"].get<std::string>()));
    ASSERT_NE(row, std::string::npos) << s["id"];
    for (const char* k : {"messages", "last_prompt_tokens", "requests", "cache_hit_ratio"}) {
      EXPECT_EQ(value_of(dom, k, row), raw(s[k])) << s["id"] << " " << k;
    }
  }
  // The trace outgrows the 6,144-token watermark of an 8K context: its compaction is a turn
  // whose prefix broke for that cause, with the compaction's figures.
  size_t compacted = 0;
  for (const auto& s : sessions["data"]) {
    if (s["compaction_history"].empty()) continue;
    ++compacted;
    const json turns = get_json("/kvgate/v1/sessions/" + s["id"].get<std::string>() + "/turns");
    bool found = false;
    for (const auto& t : turns["data"]) {
      if (t["break"].is_object() && t["break"]["cause"] == "compaction" && !t["compactions"].empty()) {
        found = true;
        EXPECT_EQ(t["compactions"][0]["tokens_before"], s["compaction_history"][0]["tokens_before"]);
      }
    }
    EXPECT_TRUE(found) << turns.dump();
  }
  EXPECT_EQ(compacted, 1u);
  // The prefill benchmark given with --prefill-report: its cliff and safe cap.
  EXPECT_EQ(status["bench_prefill"]["cliff"]["cliff_tokens"], 32768);
  EXPECT_EQ(value_of(dom, "bench_prefill.cliff.cliff_tokens"), "32768");
  EXPECT_EQ(value_of(dom, "bench_prefill.cliff.safe_cap_tokens"), "13107");
  // Slots: who holds them.
  for (const auto& slot : status["slots"]) {
    std::smatch m;
    const std::regex re(fmt::format("data-slot=\"{}\" data-v=\"([^\"]*)\"", slot["id"].get<int>()));
    ASSERT_TRUE(std::regex_search(dom, m, re)) << slot.dump();
    EXPECT_EQ(unescape(m[1]), raw(slot["session"]));
  }
}

TEST_F(StatusPageE2eTest, TheInspectorNamesTheEditedMessageAndMarkupStaysText) {
  const std::string markup = "<script>window.kvgateInjected=1</script><img src=x onerror=\"window.kvgateInjected=2\">";
  json m = json::array({{{"role", "system"}, {"content", "You review builds."}},
                        {{"role", "user"}, {"content", "The build is green, ship it. " + markup}}});
  for (const char* next : {"next step?", "and then?"}) {
    auto reply = chat(m, "inspected");
    ASSERT_TRUE(reply.has_value());
    m.push_back({{"role", "assistant"}, {"content", (*reply)["content"]}});
    m.push_back({{"role", "user"}, {"content", next}});
  }
  m[1]["content"] = "The build is red, ship it. " + markup;  // the client edits its history
  ASSERT_TRUE(chat(m, "inspected").has_value());

  const json sessions = get_json("/kvgate/v1/sessions");
  std::string id;
  for (const auto& s : sessions["data"]) {
    if (s["id"].get<std::string>().ends_with("inspected")) id = s["id"];
  }
  ASSERT_FALSE(id.empty()) << sessions.dump();
  const json turn = get_json("/kvgate/v1/sessions/" + id + "/turns/3");
  ASSERT_TRUE(turn.is_object());
  ASSERT_TRUE(turn["break"].is_object()) << turn.dump();
  EXPECT_EQ(turn["break"]["cause"], "client_edit");
  EXPECT_EQ(turn["break"]["message"], 1);

  const std::string dom = dump_dom(fmt::format("/?key={}&session={}&turn=3", kKey, id));
  ASSERT_NE(dom.find("data-state=\"ready\""), std::string::npos) << dom.substr(0, 2000);
  const size_t detail = dom.find("id=\"turn-detail\"");
  ASSERT_NE(detail, std::string::npos);
  EXPECT_EQ(value_of(dom, "break.cause", detail), "client_edit");
  EXPECT_EQ(value_of(dom, "break.message", detail), "1");
  EXPECT_EQ(value_of(dom, "break.byte_in_message", detail), "13");  // "The build is " is 13 bytes
  EXPECT_EQ(value_of(dom, "break.recomputed_tokens", detail), turn["break"]["recomputed_tokens"].dump());
  const auto before = text_of(dom, "before.differs");
  const auto after = text_of(dom, "after.differs");
  ASSERT_TRUE(before && after);
  EXPECT_TRUE(before->starts_with("green, ship it. <script>")) << *before;
  EXPECT_TRUE(after->starts_with("red, ship it. <script>")) << *after;
  EXPECT_EQ(text_of(dom, "before.same"), "The build is ");
  // The markup is text: escaped in the DOM, never an element, never run.
  EXPECT_NE(dom.find("&lt;script&gt;window.kvgateInjected=1&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(dom.find("<img src=\"x\""), std::string::npos);
  EXPECT_EQ(dom.find("<script>window.kvgateInjected"), std::string::npos);
  EXPECT_EQ(dom.find("data-injected"), std::string::npos);
}

TEST_F(StatusPageE2eTest, WithoutTheKeyOnlyTheLoginFormIsShown) {
  ASSERT_TRUE(chat(json::array({{{"role", "user"}, {"content", "a conversation someone keeps private"}}})).has_value());
  for (const char* path : {"/kvgate/v1/status", "/kvgate/v1/sessions", "/metrics"}) {
    auto r = client(false).Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
  }
  auto page = client(false).Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);  // the page holds no data: it asks for the key
  EXPECT_EQ(page->body.find("private"), std::string::npos);
  const std::string dom = dump_dom("/");
  EXPECT_NE(dom.find("data-state=\"login\""), std::string::npos) << dom.substr(0, 2000);
  EXPECT_NE(dom.find("type=\"password\""), std::string::npos);
  EXPECT_FALSE(value_of(dom, "engine.pid").has_value());
  EXPECT_FALSE(value_of(dom, "sessions").has_value());
  EXPECT_EQ(dom.find("private"), std::string::npos);
  // A wrong key is refused too.
  const std::string wrong = dump_dom("/?key=not-the-key");
  EXPECT_NE(wrong.find("data-state=\"login\""), std::string::npos);
  EXPECT_EQ(wrong.find("not-the-key"), std::string::npos);  // taken out of the address and the page
}

TEST_F(StatusPageE2eTest, ThePageAndItsAssetsAreSmallAndSelfContained) {
  httplib::Headers gz = {{"Accept-Encoding", "gzip"}};
  size_t total = 0;
  for (const char* path : {"/", "/kvgate/assets/status.js", "/kvgate/assets/chart.min.js"}) {
    auto r = client(false).Get(path, gz);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    total += r->body.size();
    EXPECT_EQ(r->body.substr(0, 2), "\x1f\x8b") << path;  // gzip
    EXPECT_EQ(r->get_header_value("Content-Encoding"), "gzip") << path;
    EXPECT_NE(r->get_header_value("Content-Security-Policy").find("script-src 'self'"), std::string::npos);
  }
  const json status = get_json("/kvgate/v1/status");
  const json sessions = get_json("/kvgate/v1/sessions");
  total += status.dump().size() + sessions.dump().size();
  EXPECT_LT(total, 200u * 1024) << "page, script, Chart.js and their data";
  auto plain = client(false).Get("/kvgate/assets/chart.min.js");
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->get_header_value("Content-Encoding").empty());
  EXPECT_NE(plain->body.find("Chart.js v3"), std::string::npos);  // Debian's Chart.js, as installed
  EXPECT_EQ(client(false).Get("/kvgate/assets/../v1/status")->status, 404);
  EXPECT_EQ(client(false).Get("/kvgate/assets/status.html")->status, 404);
}

}  // namespace
}  // namespace kvgate::cli
