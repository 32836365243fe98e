// Faults against the real `kvgate up` (the binary) serving the real pinned engine: the engine
// SIGKILLed before a request, during a prefill and mid-stream, SIGSTOPped; the session store on
// a full disk, turned read-only, locked by another process; a non-loopback bind without a key.
// Each case records what clients saw for docs/RELIABILITY.md (testing/fault_support.h).
//
// The quick cases run with the e2e tests; the long ones need KVGATE_FAULTS=1. The store cases
// mount a small ext4 image in a private mount namespace (unshare, nsenter: root and loop
// devices); where that is not permitted they are skipped and say why.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sqlite3.h>

#include "engine/pinned.h"
#include "gguf/file.h"
#include "gguf/synth.h"
#include "session/session_store.h"
#include "testing/engines_under_test.h"
#include "testing/fault_support.h"
#include "testing/gateway_e2e.h"
#include "testing/up_test_support.h"
#include "util/net.h"
#include "util/time.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using testing::record_reliability;
using testing::stream_request;
using testing::UpProcess;

using Clock = std::chrono::steady_clock;
using util::ms_since;

int run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

class UpFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("kvgate_up_faults_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto port = util::pick_free_port();
    ASSERT_TRUE(port.ok());
    port_ = *port;
  }
  void TearDown() override {
    up_.reset();
    if (!mounted_image_.empty()) run("umount -l " + (dir_ / "state").string());
    fs::remove_all(dir_);
  }

  fs::path synth(const gguf::SynthSpec& spec, const std::string& name = "m.gguf") {
    auto vocab_path = engine::vocab_file("qwen2");
    EXPECT_TRUE(vocab_path.ok());
    auto vocab = gguf::File::open(*vocab_path);
    EXPECT_TRUE(vocab.ok());
    const fs::path path = dir_ / name;
    EXPECT_TRUE(gguf::synthesize(spec, &*vocab, path).ok());
    return path;
  }

  // kvgate up's arguments: quick supervisor timings; `extra` adds or overrides options.
  std::vector<std::string> args(const fs::path& model, std::vector<std::string> extra = {}) {
    const std::vector<std::pair<std::string, std::string>> base = {
        {"--listen", fmt::format("127.0.0.1:{}", port_)},
        {"--ctx", "4096"},
        {"--threads", "2"},
        {"--health-interval", "500ms"},
        {"--probe-timeout", "2s"},
        {"--zombie-after", "2"},
        {"--backoff", "200ms"},
        {"--stop-grace", "2s"},
        {"--keepalive", "300ms"},
        {"--log-dir", (dir_ / "logs").string()},
        {"--state-dir", (dir_ / "state").string()}};
    std::vector<std::string> a{model.string()};
    for (const auto& [k, v] : base) {
      if (std::find(extra.begin(), extra.end(), k) == extra.end()) a.insert(a.end(), {k, v});
    }
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), server_args_.begin(), server_args_.end());
    return a;
  }
  std::vector<std::string> server_args_;  // --server BIN for another engine than the pinned one

  void start(std::vector<std::string> a, std::vector<std::string> prefix = {}) {
    up_ = std::make_unique<UpProcess>(std::move(a), std::move(prefix));
    ASSERT_TRUE(up_->wait_ready()) << up_->output();
    learn_bias();
  }

  // The logit bias that makes the random model speak plain words, asked through kvgate.
  void learn_bias() {
    httplib::Client c("127.0.0.1", port_);
    auto res =
        c.Post("/tokenize", R"({"content":" the of and to a in is it that for on with as was he by at"})",
               "application/json");
    ASSERT_TRUE(res && res->status == 200);
    bias_ = json::array();
    for (const auto& id : json::parse(res->body)["tokens"]) bias_.push_back({id, 100});
  }

  json body(const json& messages, int max_tokens = 8) {
    return {{"messages", messages}, {"max_tokens", max_tokens}, {"logit_bias", bias_}};
  }

  // A non-streamed chat turn; status 0 when the connection broke.
  testing::JsonAnswer chat(const json& messages, int max_tokens = 8) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120s);
    return testing::post_json(c, "/v1/chat/completions", body(messages, max_tokens));
  }

  json health() {
    httplib::Client c("127.0.0.1", port_);
    auto res = c.Get("/health");
    return res ? json::parse(res->body, nullptr, false) : json();
  }

  // The newest "request" log line after `before` of them were seen.
  // Waits until kvgate has logged at least `n` request events (a request's line is written
  // after its answer, so it may still be on its way when the client has the answer).
  size_t wait_events(size_t n) {
    for (int i = 0; i < 200 && up_->events("request").size() < n; ++i) std::this_thread::sleep_for(25ms);
    return up_->events("request").size();
  }

  // The first request event after the first `before` ones; with `messages`, the first of them
  // for a request of that many messages (so a late line of an earlier request is passed over).
  json next_request_event(size_t before, std::optional<size_t> messages = std::nullopt) {
    for (int i = 0; i < 200; ++i) {
      auto ev = up_->events("request");
      for (size_t k = before; k < ev.size(); ++k) {
        if (!messages || ev[k].value("messages", size_t{0}) == *messages) return ev[k];
      }
      std::this_thread::sleep_for(25ms);
    }
    return json();
  }

  // Mounts an ext4 image at dir_/state inside a private mount namespace in which kvgate runs
  // (the prefix for UpProcess). Empty when not permitted here.
  std::vector<std::string> private_state_mount(const std::string& size = "16M") {
    const fs::path image = dir_ / "state.img";
    if (!fs::exists(image)) {
      if (run(fmt::format("truncate -s {} {} && mkfs.ext4 -q -F {}", size, image.string(), image.string())) !=
          0) {
        return {};
      }
    }
    fs::create_directories(dir_ / "state");
    const std::string probe =
        fmt::format("unshare -m --propagation private sh -c 'mount -o loop,errors=remount-ro {} {}'",
                    image.string(), (dir_ / "state").string());
    if (run(probe) != 0) return {};
    mounted_image_ = image.string();
    return {"/usr/bin/unshare",  // the prefix is executed as is (no PATH search); util-linux puts it here
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            fmt::format("mount -o loop,errors=remount-ro {} {} && exec \"$0\" \"$@\"", image.string(),
                        (dir_ / "state").string())};
  }
  // Runs `command` inside kvgate's mount namespace.
  int in_namespace(const std::string& command) {
    return run(fmt::format("nsenter -t {} -m -- sh -c '{}'", up_->pid(), command));
  }

  fs::path dir_;
  uint16_t port_ = 0;
  std::unique_ptr<UpProcess> up_;
  json bias_ = json::array();
  std::string mounted_image_;
};

json conversation(const std::string& tag, int turns) {
  json m = json::array({{{"role", "system"}, {"content", fmt::format("You are the assistant of {}.", tag)}}});
  for (int i = 0; i < turns; ++i) {
    m.push_back({{"role", "user"}, {"content", fmt::format("[{}] question {}", tag, i)}});
    if (i + 1 < turns) m.push_back({{"role", "assistant"}, {"content", "fine"}});
  }
  return m;
}

std::string kind_of(const testing::JsonAnswer& a) {
  if (a.status == 0) return "connection broken";
  std::string k = std::to_string(a.status);
  if (a.status != 200 && a.body.is_object() && a.body.contains("error"))
    k += " " + a.body["error"].value("code", "");
  return k;
}

// ---- the engine --------------------------------------------------------------------------

// The engine faults, against both engines (the ik_llama.cpp build when one is available).
class UpEngineFaultsTest : public UpFaultsTest, public ::testing::WithParamInterface<plan::Fork> {
 protected:
  void SetUp() override {
    UpFaultsTest::SetUp();
    if (GetParam() == plan::Fork::kIk) {
      auto ik = testing::ik_server_under_test();
      if (!ik) GTEST_SKIP() << testing::kIkAbsent;
      server_args_ = {"--server", ik->string()};
    }
  }
};
INSTANTIATE_TEST_SUITE_P(Engines, UpEngineFaultsTest, ::testing::Values(plan::Fork::kMainline, plan::Fork::kIk),
                         [](const ::testing::TestParamInfo<plan::Fork>& i) { return std::string(plan::fork_name(i.param)); });

TEST_P(UpEngineFaultsTest, EngineKilledBetweenRequestsAndMidStream) {
  auto model = synth(*gguf::synth_defaults("qwen3"));
  start(args(model));
  std::map<std::string, int> client;
  json messages = conversation("kill", 1);
  auto a = chat(messages);
  ASSERT_EQ(a.status, 200) << a.raw;
  messages.push_back(a.body["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "[kill] and next?"}});

  // 1. SIGKILL between two requests; the next one arrives at once.
  const pid_t first = up_->engine_pid();
  ASSERT_GT(first, 0);
  ::kill(first, SIGKILL);
  const auto t0 = Clock::now();
  size_t before = wait_events(1);
  a = chat(messages);
  const double between_ms = ms_since(t0);
  client[kind_of(a)]++;
  ASSERT_EQ(a.status, 200) << a.raw << up_->output();
  EXPECT_EQ(up_->engine_starts(), 2);
  json ev = next_request_event(before);
  EXPECT_EQ(ev.value("recognised_by", ""), "prefix") << ev.dump();
  const std::string session = ev.value("session", "");
  messages.push_back(a.body["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "[kill] a long answer please"}});

  // 2. SIGKILL while the answer streams: the client gets what was relayed, an error event,
  //    and the end of the stream; the turn is not committed, so sending it again works.
  std::atomic<bool> killed{false};
  const pid_t second = up_->engine_pid();
  auto st =
      stream_request(port_, body(messages, 400), {}, 60s, [&](const testing::StreamOutcome& o) {
        if (!killed && !o.content.empty()) {
          ::kill(second, SIGKILL);
          killed = true;
        }
        return true;
      });
  ASSERT_TRUE(killed.load()) << st.body;
  EXPECT_EQ(st.status, 200);
  EXPECT_FALSE(st.transport_error) << "the client's stream must end properly";
  ASSERT_TRUE(st.error.has_value()) << st.body;
  EXPECT_EQ(st.error->value("type", ""), "server_error");
  EXPECT_FALSE(st.done);
  EXPECT_LT(st.ms, 10000);
  client["200 + partial + in-stream error"]++;
  before = wait_events(3);  // the two turns and the cut stream
  a = chat(messages);
  client[kind_of(a)]++;
  ASSERT_EQ(a.status, 200) << a.raw;
  ev = next_request_event(before);
  EXPECT_EQ(ev.value("session", ""), session) << "the same conversation, recognised again";
  EXPECT_EQ(ev.value("recognised_by", ""), "prefix");
  EXPECT_EQ(up_->engine_starts(), 3);
  EXPECT_TRUE(up_->running());
  record_reliability(
      "engine_sigkill_between_and_mid_stream",
      {{"fault", "engine SIGKILLed between requests, and while an answer streams"},
       {"expected",
        "between: the request waits for the restart and is answered; mid-stream: partial "
        "answer + in-stream error, stream ended; the turn is not committed; the engine is "
        "restarted; the session is recognised after"},
       {"test", "UpFaultsTest.EngineKilledBetweenRequestsAndMidStream"},
       {"faults", 2},
       {"client", client},
       {"engine_restarts", up_->engine_starts() - 1},
       {"measured_ms", {{"request_after_kill", between_ms}, {"mid_stream_kill_to_end", st.ms}}},
       {"sessions_lost", 0},
       {"crashes", 0},
       {"result", "pass"}});
}

TEST_P(UpEngineFaultsTest, EngineKilledDuringPrefill) {
  KVGATE_REQUIRE_LONG_SUITE();
  // A model slow enough to prefill for seconds on two cores.
  gguf::SynthSpec spec = *gguf::synth_defaults("qwen3");
  spec.n_layer = 8;
  spec.n_embd = 768;
  spec.n_head = 12;
  spec.n_head_kv = 4;
  spec.head_dim = 64;
  spec.n_ff = 3072;
  auto model = synth(spec);
  start(args(model,
             {"--ctx", "8192", "--start-timeout", "2m", "--ready-timeout", "2m", "--probe-timeout", "10s"}));
  auto long_prompt = [](const std::string& tag) {
    std::string filler;
    for (int i = 0; i < 400; ++i)
      filler += fmt::format("line {} of the {} report on rivers and lakes. ", i, tag);
    json m = conversation(tag, 1);
    m.back()["content"] = m.back()["content"].get<std::string>() + " " + filler;
    return m;
  };
  // How long one such prefill takes here.
  auto t0 = Clock::now();
  auto calib = chat(long_prompt("calibration"), 1);
  const double prefill_ms = ms_since(t0);
  ASSERT_EQ(calib.status, 200) << calib.raw;
  const uint64_t prompt_tokens = calib.body["usage"]["prompt_tokens"];
  ASSERT_GT(prefill_ms, 1500) << "the prefill must last long enough to be interrupted";
  std::map<std::string, int> client;

  // Streamed: killed at the first prefill progress the client sees (ik sends no progress:
  // at the first keep-alive before any content, which is also during the prefill).
  int starts = up_->engine_starts();
  pid_t engine = up_->engine_pid();
  std::atomic<bool> killed{false};
  std::string killed_at;
  const bool progress = GetParam() == plan::Fork::kMainline;
  t0 = Clock::now();
  auto st = stream_request(
      port_, body(long_prompt("stream"), 4), {}, 120s, [&](const testing::StreamOutcome& o) {
        if (!killed && !o.comments.empty() &&
            (!progress || o.comments.back().find("prefill") != std::string::npos) && o.content.empty()) {
          killed_at = o.comments.back();
          ::kill(engine, SIGKILL);
          killed = true;
        }
        return true;
      });
  const double stream_ms = ms_since(t0);
  ASSERT_TRUE(killed.load()) << "no prefill progress was seen: " << st.body.substr(0, 500);
  EXPECT_EQ(st.status, 200);
  EXPECT_TRUE(st.done) << "the request is sent again to the restarted engine and completes: "
                       << st.body.substr(0, 500);
  EXPECT_FALSE(st.error.has_value()) << st.body.substr(0, 500);
  EXPECT_EQ(up_->engine_starts(), starts + 1);
  client[st.done ? "200 completed (sent again after the restart)" : "200 + in-stream error"]++;

  // Not streamed: killed at 40 % of the measured prefill time.
  starts = up_->engine_starts();
  engine = up_->engine_pid();
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(prefill_ms * 0.4)));
    ::kill(engine, SIGKILL);
  });
  t0 = Clock::now();
  auto a = chat(long_prompt("plain"), 4);
  const double plain_ms = ms_since(t0);
  killer.join();
  EXPECT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(up_->engine_starts(), starts + 1);
  client[kind_of(a) + (a.status == 200 ? " completed (sent again after the restart)" : "")]++;
  EXPECT_TRUE(up_->running());
  record_reliability(
      "engine_sigkill_during_prefill",
      {{"fault", fmt::format("engine SIGKILLed during the prefill of a {}-token prompt (stream: at the first "
                             "progress event, \"{}\"; non-stream: at 40 % of the measured {:.0f} ms)",
                             prompt_tokens, killed_at.substr(2, killed_at.find('\n') - 2), prefill_ms)},
       {"expected",
        "nothing had reached the client: the request is sent again to the restarted engine "
        "and completes"},
       {"test", "UpFaultsTest.EngineKilledDuringPrefill"},
       {"faults", 2},
       {"client", client},
       {"engine_restarts", 2},
       {"measured_ms",
        {{"stream_total", stream_ms}, {"non_stream_total", plain_ms}, {"one_prefill", prefill_ms}}},
       {"sessions_lost", 0},
       {"crashes", 0},
       {"result", a.status == 200 && st.done ? "pass" : "fail"}});
}

TEST_P(UpEngineFaultsTest, EngineStoppedIsDetectedKilledAndRequestsComplete) {
  KVGATE_REQUIRE_LONG_SUITE();
  auto model = synth(*gguf::synth_defaults("qwen3"));
  start(args(model));
  std::map<std::string, int> client;
  ASSERT_EQ(chat(conversation("hang", 1)).status, 200);
  const pid_t engine = up_->engine_pid();
  ::kill(engine, SIGSTOP);
  const auto t0 = Clock::now();
  // Two requests reach the frozen engine: one streamed, one not.
  testing::StreamOutcome st;
  std::thread streamer(
      [&] { st = stream_request(port_, body(conversation("hang-stream", 1), 8), {}, 120s); });
  auto a = chat(conversation("hang-plain", 1));
  streamer.join();
  const double ms = ms_since(t0);
  client[kind_of(a)]++;
  client[st.done ? "200 stream completed" : st.error ? "200 + in-stream error" : "stream broken"]++;
  EXPECT_EQ(a.status, 200) << a.raw;
  EXPECT_TRUE(st.done || st.error.has_value()) << st.body;
  EXPECT_FALSE(st.transport_error);
  EXPECT_FALSE(testing::process_alive(engine)) << "the frozen engine was killed";
  EXPECT_EQ(up_->engine_starts(), 2);
  EXPECT_NE(up_->output().find("zombie"), std::string::npos) << up_->output();
  // Bound: --zombie-after 2 × (--health-interval 0.5 s + --probe-timeout 2 s) + stop grace
  // 2 s + restart, well under the upstream time-out.
  EXPECT_LT(ms, 20000);
  record_reliability(
      "engine_sigstop",
      {{"fault", "engine SIGSTOPped (frozen: /health no longer answers either) with two requests on it"},
       {"expected",
        "detected by the deep probes (--zombie-after × (--health-interval + --probe-timeout)), "
        "killed and restarted; the requests, of which nothing was relayed, are sent again "
        "and complete"},
       {"test", "UpFaultsTest.EngineStoppedIsDetectedKilledAndRequestsComplete"},
       {"faults", 1},
       {"client", client},
       {"engine_restarts", up_->engine_starts() - 1},
       {"measured_ms", {{"stop_to_both_answered", ms}}},
       {"bound_ms", 20000},
       {"sessions_lost", 0},
       {"crashes", 0},
       {"result", a.status == 200 && !st.transport_error ? "pass" : "fail"}});
}

// ---- the session store -----------------------------------------------------------------

// Counts the sessions in the store file and checks that every user message of a session
// carries that session's tag (no conversation mixed into another).
struct StoreCheck {
  uint64_t sessions = 0;
  int mixed = 0;
  std::map<std::string, size_t> messages_by_tag;
};
StoreCheck check_store(const fs::path& db, const std::vector<std::string>& tags) {
  StoreCheck out;
  auto store = session::SessionStore::open(db);
  if (!store.ok()) return out;
  sqlite3* raw = nullptr;
  sqlite3_open_v2(db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(raw, "SELECT id FROM sessions", -1, &q, nullptr);
  std::vector<std::string> ids;
  while (sqlite3_step(q) == SQLITE_ROW)
    ids.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)));
  sqlite3_finalize(q);
  sqlite3_close(raw);
  out.sessions = ids.size();
  for (const auto& id : ids) {
    auto s = (*store)->load(id);
    if (!s.ok() || !s->has_value()) continue;
    const std::string text = (**s).state.dump();
    std::string owner;
    for (const auto& t : tags) {
      if (text.find("[" + t + "]") == std::string::npos) continue;
      if (!owner.empty()) ++out.mixed;
      owner = t;
    }
    out.messages_by_tag[owner] = (**s).state.value("length", size_t{0});
  }
  return out;
}

TEST_F(UpFaultsTest, SessionStoreLockedByAnotherProcess) {
  auto model = synth(*gguf::synth_defaults("qwen3"));
  start(args(model));
  std::map<std::string, int> client;
  json messages = conversation("locked", 1);
  auto turn = [&](const std::string& text) {
    auto a = chat(messages);
    client[kind_of(a)]++;
    if (a.status == 200) {
      messages.push_back(a.body["choices"][0]["message"]);
      messages.push_back({{"role", "user"}, {"content", "[locked] " + text}});
    }
    return a.status;
  };
  ASSERT_EQ(turn("one"), 200);
  const fs::path db = dir_ / "state" / "sessions.db";
  // Another process (this test) takes the write lock and holds it.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  const auto t0 = Clock::now();
  EXPECT_EQ(turn("two"), 200);
  EXPECT_EQ(turn("three"), 200);
  const double locked_ms = ms_since(t0) / 2;
  EXPECT_EQ(health().value("session_store", ""), "failing");
  // A new conversation meanwhile is served too (its lookups wait at most 250 ms).
  auto t1 = Clock::now();
  EXPECT_EQ(chat(conversation("newcomer", 1)).status, 200);
  const double newcomer_ms = ms_since(t1);
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  EXPECT_EQ(turn("four"), 200);  // saved: the whole state, turns two and three included
  EXPECT_EQ(health().value("session_store", ""), "ok");
  // kvgate is killed and started again: the conversation continues as the same session.
  up_->kill9();
  EXPECT_EQ(up_->wait_exit(), -SIGKILL);
  start(args(model));
  const size_t before = up_->events("request").size();
  EXPECT_EQ(turn("five"), 200);
  json ev = next_request_event(before);
  EXPECT_EQ(ev.value("recognised_by", ""), "prefix") << ev.dump();
  EXPECT_TRUE(ev.value("loaded", false)) << ev.dump();
  up_.reset();
  auto check = check_store(db, {"locked", "newcomer"});
  EXPECT_EQ(check.sessions, 2u);
  EXPECT_EQ(check.mixed, 0);
  EXPECT_EQ(check.messages_by_tag["locked"], 11u) << "system + 5 user turns + 5 replies: every answered turn";
  record_reliability(
      "store_locked",
      {{"fault",
        "another process holds the SQLite write lock (BEGIN IMMEDIATE) for two turns and a new "
        "conversation, then releases it; then kvgate is killed -9 and restarted"},
       {"expected",
        "answers served (a save waits 2 s, then fails: counted, /health session_store "
        "\"failing\"); the next save writes the whole state; after the restart the "
        "conversation is recognised from the store with every answered turn"},
       {"test", "UpFaultsTest.SessionStoreLockedByAnotherProcess"},
       {"faults", 3},
       {"client", client},
       {"measured_ms", {{"turn_while_locked", locked_ms}, {"new_conversation_while_locked", newcomer_ms}}},
       {"sessions_lost", 0},
       {"sessions_mixed", check.mixed},
       {"crashes", 0},
       {"result", check.mixed == 0 && check.messages_by_tag["locked"] == 11u ? "pass" : "fail"}});
}

TEST_F(UpFaultsTest, SessionStoreOnAFullDiskAndTurnedReadOnly) {
  KVGATE_REQUIRE_LONG_SUITE();
  auto prefix = private_state_mount("16M");
  if (prefix.empty()) {
    record_reliability(
        "store_disk_full_read_only",
        {{"fault", "session store on a full disk, then read-only"},
         {"test", "UpFaultsTest.SessionStoreOnAFullDiskAndTurnedReadOnly"},
         {"result", "not run: mounting a loop device in a private mount namespace is not permitted here"}});
    GTEST_SKIP() << "needs root, unshare -m and loop devices";
  }
  auto model = synth(*gguf::synth_defaults("qwen3"));
  start(args(model), prefix);
  std::map<std::string, int> client;
  json messages = conversation("disk", 1);
  auto turn = [&](const std::string& text) {
    auto a = chat(messages);
    client[kind_of(a)]++;
    if (a.status == 200) {
      messages.push_back(a.body["choices"][0]["message"]);
      messages.push_back({{"role", "user"}, {"content", "[disk] " + text}});
    }
    return a.status;
  };
  ASSERT_EQ(turn("one"), 200);
  ASSERT_EQ(turn("two"), 200);
  const std::string state = (dir_ / "state").string();
  // 1. The disk fills up (a file takes every free block).
  in_namespace(fmt::format("cat /dev/zero > {}/fill", state));
  // (A few bytes may still fit in blocks the filler could not use; a page's worth does not.)
  EXPECT_NE(in_namespace(fmt::format("head -c 65536 /dev/zero > {}/probe", state)), 0) << "the disk should be full";
  EXPECT_EQ(turn("three, disk full"), 200);
  EXPECT_EQ(turn("four, disk full"), 200);
  EXPECT_EQ(health().value("session_store", ""), "failing");
  // Space comes back: the next save writes the whole state.
  in_namespace(fmt::format("rm -f {}/fill {}/probe", state, state));
  EXPECT_EQ(turn("five"), 200);
  EXPECT_EQ(health().value("session_store", ""), "ok");
  // 2. The file system turns read-only under kvgate (an ext4 error with errors=remount-ro).
  const int ro = in_namespace(
      fmt::format("echo 1 > /sys/fs/ext4/$(basename $(findmnt -no SOURCE {}))/trigger_fs_error", state));
  EXPECT_EQ(ro, 0);
  EXPECT_NE(in_namespace(fmt::format("touch {}/probe", state)), 0) << "the file system should be read-only";
  EXPECT_EQ(turn("six, read-only"), 200);
  EXPECT_EQ(health().value("session_store", ""), "failing");
  EXPECT_TRUE(up_->running());
  // kvgate is killed; it comes back on the same image (mounted again, writable): what was
  // committed before the file system turned read-only is there.
  up_->kill9();
  EXPECT_EQ(up_->wait_exit(), -SIGKILL);
  start(args(model), prefix);
  const size_t before = up_->events("request").size();
  EXPECT_EQ(turn("seven"), 200);
  json ev = next_request_event(before);
  EXPECT_EQ(ev.value("recognised_by", ""), "prefix") << ev.dump();
  EXPECT_TRUE(ev.value("loaded", false)) << ev.dump();
  const uint64_t stored_requests = [&] {
    httplib::Client c("127.0.0.1", port_);
    auto res = c.Get(("/kvgate/v1/sessions/" + ev.value("session", "")).c_str());
    return res ? json::parse(res->body).value("requests", uint64_t{0}) : 0;
  }();
  // Turns one to five were committed (five saved the whole state); six was answered while
  // read-only, seven after the restart: the session counts 5 + 1.
  EXPECT_EQ(stored_requests, 6u);
  record_reliability("store_disk_full_read_only",
                     {{"fault",
                       "session store (ext4 image in a private mount namespace) filled to the last block for "
                       "two turns; later the file system turned read-only (ext4 error, errors=remount-ro); "
                       "kvgate killed -9 and restarted on the image"},
                      {"expected",
                       "answers served from memory (saves fail: counted, /health session_store \"failing\"); "
                       "the first save after space returns writes the whole state; after the restart the "
                       "conversation is recognised with every turn committed before the fault"},
                      {"test", "UpFaultsTest.SessionStoreOnAFullDiskAndTurnedReadOnly"},
                      {"faults", 3},
                      {"client", client},
                      {"sessions_lost", 0},
                      {"crashes", 0},
                      {"result", stored_requests == 6u ? "pass" : "fail"}});
}

TEST_F(UpFaultsTest, NonLoopbackListenWithoutAKeyIsRefused) {
  auto model = synth(*gguf::synth_defaults("qwen3"));
  std::map<std::string, int> client;
  for (const std::string listen : {"0.0.0.0", "[::]", "192.0.2.10", "[2001:db8::1]", "10.1.2.3"}) {
    UpProcess up({model.string(), "--listen", fmt::format("{}:{}", listen, port_), "--log-dir",
                  (dir_ / "logs").string()});
    EXPECT_EQ(up.wait_exit(), 2) << listen;
    EXPECT_NE(up.output().find("give --api-key"), std::string::npos) << up.output();
    EXPECT_EQ(up.output().find("engine start"), std::string::npos) << "nothing starts";
    client["exit 2 (" + listen + ")"]++;
  }
  // The same from a config file.
  {
    std::ofstream(dir_ / "c.json") << fmt::format(R"({{"listen": "0.0.0.0:{}"}})", port_);
    UpProcess up(
        {model.string(), "--config", (dir_ / "c.json").string(), "--log-dir", (dir_ / "logs").string()});
    EXPECT_EQ(up.wait_exit(), 2);
    EXPECT_NE(up.output().find("give --api-key"), std::string::npos) << up.output();
    client["exit 2 (config file)"]++;
  }
  record_reliability(
      "abuse_open_bind_without_key",
      {{"fault",
        "--listen 0.0.0.0, [::], LAN and documentation addresses, and via --config, without --api-key"},
       {"expected", "refused with exit 2 before anything starts"},
       {"test", "UpFaultsTest.NonLoopbackListenWithoutAKeyIsRefused"},
       {"faults", 6},
       {"client", client},
       {"sessions_lost", 0},
       {"crashes", 0},
       {"result", "pass"}});
}

// ---- kvgate itself ----------------------------------------------------------------------

TEST_F(UpFaultsTest, KvgateKilledAtRandomPointsAndRestarted) {
  KVGATE_REQUIRE_LONG_SUITE();
  auto model = synth(*gguf::synth_defaults("qwen3"));
  // A slot per conversation, so each keeps its cache while the others take their turns.
  const auto up_args = args(model, {"--parallel", "3", "--ctx", "8192"});
  start(up_args);
  const char* seed_env = std::getenv("KVGATE_FAULT_SEED");
  const uint32_t seed = seed_env ? static_cast<uint32_t>(std::strtoul(seed_env, nullptr, 10)) : 20261130u;
  std::mt19937 rng(seed);
  const std::vector<std::string> tags = {"alpha", "beta", "gamma"};
  struct Conv {
    std::string tag;
    json messages;  // ends with the next user message
    std::string session;
    int next = 1;
    size_t sent = 0;  // messages in the last request
  };
  std::vector<Conv> convs;
  for (const auto& t : tags) convs.push_back({t, conversation(t, 1), "", 1, 0});
  std::map<std::string, int> client;
  std::map<std::string, int> kill_points;
  int lost = 0, not_cached = 0, turns = 0, recognised = 0, rescued_turns = 0;

  auto commit = [](Conv& c, const json& reply) {
    c.messages.push_back(reply);
    c.messages.push_back({{"role", "user"}, {"content", fmt::format("[{}] question {}", c.tag, c.next++)}});
  };
  // One turn; `kill` (optional) runs concurrently and kills kvgate at its chosen point.
  auto take_turn = [&](Conv& c, int mode) -> int {
    ++turns;
    const size_t before = up_->events("request").size();
    c.sent = c.messages.size();
    if (mode == 2) {  // mid-stream, after a few content events
      const size_t after = 1 + rng() % 3;
      size_t seen = 0;
      bool killed = false;
      auto st =
          stream_request(port_, body(c.messages, 48), {}, 60s, [&](const testing::StreamOutcome& o) {
            seen = o.chunks.size();
            if (!killed && seen >= after) {
              up_->kill9();
              killed = true;
            }
            return true;
          });
      const bool complete = st.done && !st.transport_error;
      client[complete ? "200 completed before the kill" : "stream cut by the kill"]++;
      if (complete) {
        json reply = {{"role", "assistant"}, {"content", st.content}};
        commit(c, reply);
      }
      return complete ? 200 : 0;
    }
    std::thread killer;
    if (mode == 1) {
      const auto delay = std::chrono::milliseconds(rng() % 400);
      killer = std::thread([this, delay] {
        std::this_thread::sleep_for(delay);
        up_->kill9();
      });
    }
    auto a = chat(c.messages);
    if (killer.joinable()) killer.join();
    client[a.status == 200 ? "200" : "connection broken by the kill"]++;
    if (a.status == 200) {
      commit(c, a.body["choices"][0]["message"]);
      if (mode == 0 && c.session.empty()) c.session = next_request_event(before, c.sent).value("session", "");
    }
    if (mode == 3) up_->kill9();  // right after the client has its answer
    return a.status;
  };

  // Turn 1 of each conversation: learn its session.
  for (auto& c : convs) ASSERT_EQ(take_turn(c, 0), 200);
  for (auto& c : convs) ASSERT_FALSE(c.session.empty());
  const int rounds = 10;
  for (int round = 0; round < rounds; ++round) {
    const size_t victim = rng() % convs.size();
    const int mode =
        static_cast<int>(rng() % 4);  // 0 between turns, 1 during a request, 2 mid-stream, 3 after an answer
    static const char* kNames[] = {"between turns", "during a request", "mid-stream",
                                   "right after an answer"};
    kill_points[kNames[mode]]++;
    for (size_t i = 0; i < convs.size(); ++i) {
      if (!up_->running()) break;
      take_turn(convs[i], i == victim ? mode : 0);
    }
    if (up_->running()) up_->kill9();
    EXPECT_EQ(up_->wait_exit(), -SIGKILL);
    start(up_args);
    // Each request logs one line, in order: the n-th line of this process is the n-th request.
    size_t logged = 0;
    // Each conversation's next turn: recognised as itself, from the store.
    for (auto& c : convs) {
      ASSERT_EQ(take_turn(c, -1), 200) << c.tag;
      json ev = next_request_event(logged++);
      const bool same = ev.value("session", "") == c.session && ev.value("recognised_by", "") == "prefix";
      if (!same) ++lost;
      recognised += same ? 1 : 0;
      EXPECT_TRUE(same) << c.tag << " round " << round << ": " << ev.dump();
      EXPECT_TRUE(ev.value("loaded", false)) << ev.dump();
    }
    // ... and the turn after that is served from the engine's cache.
    for (auto& c : convs) {
      ASSERT_EQ(take_turn(c, -1), 200) << c.tag;
      json ev = next_request_event(logged++);
      // A rescued answer (the engine rejected its own output, docs/RESCUE.md) reports the
      // replay's usage, which has no cache figures when the engine refuses the replay's last
      // event too: such a turn says nothing about the cache either way.
      if (ev.value("rescued", false)) {
        ++rescued_turns;
        continue;
      }
      const uint64_t prompt = ev.value("prompt_tokens", uint64_t{0});
      const uint64_t cached = ev.value("cached_tokens", uint64_t{0});
      if (cached * 10 < prompt * 6) ++not_cached;
      EXPECT_GE(cached * 10, prompt * 6) << c.tag << ": " << ev.dump();
    }
  }
  up_.reset();
  auto check = check_store(dir_ / "state" / "sessions.db", tags);
  EXPECT_EQ(check.sessions, 3u);
  EXPECT_EQ(check.mixed, 0);
  for (const auto& c : convs) {
    // The store holds the conversation as the client last saw it (request + reply).
    EXPECT_EQ(check.messages_by_tag[c.tag], c.messages.size() - 1) << c.tag;
  }
  json kp = kill_points;
  record_reliability(
      "kvgate_sigkill_restart",
      {{"fault", fmt::format("kvgate killed -9 {} times at random points (seed {}) in 3 conversations, "
                             "restarted each time on the same state directory",
                             rounds, seed)},
       {"kill_points", kp},
       {"expected",
        "a request cut by the kill fails at the client (connection closed), nothing else; "
        "after the restart each conversation's next turn is recognised as the same session "
        "from the store, and the turn after it is served from the engine's cache; no "
        "session lost or mixed"},
       {"test", "UpFaultsTest.KvgateKilledAtRandomPointsAndRestarted"},
       {"faults", rounds},
       {"turns", turns},
       {"client", client},
       {"recognised_after_restart", recognised},
       {"not_served_from_cache", not_cached},
       {"rescued_turns_not_judged", rescued_turns},
       {"sessions_lost", lost},
       {"sessions_mixed", check.mixed},
       {"crashes", 0},
       {"result", lost == 0 && check.mixed == 0 && not_cached == 0 ? "pass" : "fail"}});
}

}  // namespace
}  // namespace kvgate::cli
