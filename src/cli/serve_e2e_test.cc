// `kvgate serve` end to end: the real kvgate binary in front of a pinned llama-server the test
// starts itself (as systemd or supervisord would), never one kvgate launched. A recorded agent
// trace replayed through it has no failed turn and recomputes no more than the same replay
// through `kvgate up` on the same model and context; the server going away and coming back
// costs the waiting request a 503 with Retry-After at most, never a hang; a server that cannot
// count tokens (a proxy hides its /apply-template) is compacted by a learned estimate before
// it refuses a prompt, and one that tokenizes chat messages as vLLM does is counted exactly
// with them; bad upstreams and options are clear errors.
#include <algorithm>
#include <filesystem>
#include <iterator>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "bench/trace.h"
#include "engine/pinned.h"
#include "gguf/file.h"
#include "gguf/synth.h"
#include "plan/chat_template.h"
#include "testing/engines_under_test.h"
#include "testing/filtering_proxy.h"
#include "testing/paths.h"
#include "testing/up_test_support.h"
#include "util/net.h"
#include "util/private_files.h"
#include "util/subprocess.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kEngineKey = "engine-key-for-serve";

struct ReplayFigures {
  int turns = 0;
  int failed = 0;
  uint64_t prompt = 0;
  uint64_t cached = 0;
  double prefilled_ratio() const { return prompt ? static_cast<double>(prompt - cached) / static_cast<double>(prompt) : 1; }
};

ReplayFigures replay(uint16_t port, const bench::Trace& trace) {
  ReplayFigures f;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  for (json body : trace.turns) {
    body["max_tokens"] = 16;
    body["stream"] = false;
    // Greedy: the two replays get the same replies, and a rescue happens in both or neither.
    body["temperature"] = 0;
    ++f.turns;
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    if (!r || r->status != 200) {
      ++f.failed;
      continue;
    }
    const json j = json::parse(r->body, nullptr, false);
    const json u = j.value("usage", json::object());
    f.prompt += u.value("prompt_tokens", uint64_t{0});
    f.cached += u.value("prompt_tokens_details", json::object()).value("cached_tokens", uint64_t{0});
  }
  return f;
}

class ServeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("kvgate_serve_e2e_{}_{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto vocab_path = engine::vocab_file("qwen2");
    ASSERT_TRUE(vocab_path.ok());
    auto vocab = gguf::File::open(*vocab_path);
    ASSERT_TRUE(vocab.ok());
    model_ = dir_ / "m.gguf";
    ASSERT_TRUE(gguf::synthesize(*gguf::synth_defaults("qwen3"), &*vocab, model_).ok());
  }
  void TearDown() override {
    if (engine_) engine_->stop();
    fs::remove_all(dir_);
  }

  static uint16_t free_port() {
    auto p = util::pick_free_port();
    EXPECT_TRUE(p.ok());
    return p.ok() ? *p : 0;
  }

  // The pinned llama-server with the settings `kvgate up --ctx 8192` gives it; `stable`: its
  // chat template too (plan/chat_template.h), else the model's own; `reuse`: --cache-reuse 256.
  void start_engine(uint16_t port, bool stable = false, int ctx = 8192, bool reuse = true) {
    auto server = engine::resolve_server();
    ASSERT_TRUE(server.ok()) << server.error().message();
    std::vector<std::string> argv = {server->string(),
                                     "-m",
                                     model_.string(),
                                     "-c",
                                     std::to_string(ctx),
                                     "-np",
                                     "1",
                                     "-ngl",
                                     "0",
                                     "--no-context-shift",
                                     "--jinja",
                                     "-t",
                                     testing::engine_threads(),
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(port),
                                     "--api-key",
                                     kEngineKey};
    if (reuse) argv.insert(argv.end(), {"--cache-reuse", "256"});
    if (stable) {
      auto model = gguf::File::open(model_);
      ASSERT_TRUE(model.ok());
      const plan::StableTemplate t =
          plan::prefix_stable_template(model->get_string("tokenizer.chat_template").value_or(""));
      ASSERT_TRUE(t.patched()) << t.describe();
      ASSERT_TRUE(util::write_private_file(dir_ / "chat-template.jinja", t.text).ok());
      argv.insert(argv.end(), {"--chat-template-file", (dir_ / "chat-template.jinja").string()});
    }
    auto p = util::Subprocess::spawn({.argv = argv, .on_line = [](std::string_view) {}});
    ASSERT_TRUE(p.ok()) << p.error().message();
    engine_ = std::move(*p);
  }

  fs::path dir_;
  fs::path model_;
  std::unique_ptr<util::Subprocess> engine_;
};

TEST_F(ServeE2eTest, ATraceThroughServeRecomputesNoMoreThanThroughUp) {
  auto trace = bench::load_trace(fs::path(kvgate::testing::source_dir()) / "tests/fixtures/traces/agent-timestamp.jsonl.zst", 12);
  ASSERT_TRUE(trace.ok()) << trace.error().message();
  const uint16_t engine_port = free_port();
  start_engine(engine_port, true);
  const uint16_t serve_port = free_port();
  ReplayFigures via_serve;
  {
    testing::UpProcess serve({"--upstream", fmt::format("http://127.0.0.1:{}", engine_port), "--upstream-key",
                              kEngineKey, "--listen", fmt::format("127.0.0.1:{}", serve_port), "--state-dir", "none"},
                             {}, "serve");
    ASSERT_TRUE(serve.wait_ready()) << serve.output();
    const std::string out = serve.output();
    EXPECT_NE(out.find("mainline llama.cpp b"), std::string::npos) << out;
    EXPECT_NE(out.find("1 slot of 8192 tokens each"), std::string::npos) << out;
    EXPECT_NE(out.find("token counts: exact"), std::string::npos) << out;
    EXPECT_EQ(out.find("its chat template renders an earlier reply differently"), std::string::npos) << out;
    // Its --cache-reuse is not in /props: kvgate asked, and lays compactions out as `up` does.
    EXPECT_NE(out.find("cached chunks after a deletion: moved into place"), std::string::npos) << out;
    via_serve = replay(serve_port, *trace);
    httplib::Client c("127.0.0.1", serve_port);
    auto status = c.Get("/kvgate/v1/status");
    ASSERT_TRUE(status && status->status == 200);
    const json st = json::parse(status->body);
    EXPECT_EQ(st["engine"]["upstream"], fmt::format("http://127.0.0.1:{}", engine_port));
    EXPECT_EQ(st["engine"]["fork"], "mainline");
  }
  engine_->stop();
  engine_.reset();

  const uint16_t up_port = free_port();
  ReplayFigures via_up;
  {
    testing::UpProcess up({model_.string(), "--listen", fmt::format("127.0.0.1:{}", up_port), "--ctx", "8192",
                           "--threads", testing::engine_threads(), "--state-dir", "none", "--log-dir",
                           (dir_ / "logs").string()});
    ASSERT_TRUE(up.wait_ready()) << up.output();
    via_up = replay(up_port, *trace);
  }
  std::printf("[figures] serve: %d/%d failed, prefilled/prompt %.3f (%llu/%llu); up: %d/%d failed, %.3f (%llu/%llu)\n",
              via_serve.failed, via_serve.turns, via_serve.prefilled_ratio(),
              static_cast<unsigned long long>(via_serve.prompt - via_serve.cached),
              static_cast<unsigned long long>(via_serve.prompt), via_up.failed, via_up.turns, via_up.prefilled_ratio(),
              static_cast<unsigned long long>(via_up.prompt - via_up.cached),
              static_cast<unsigned long long>(via_up.prompt));
  EXPECT_EQ(via_serve.failed, 0);
  EXPECT_EQ(via_up.failed, 0);
  EXPECT_GT(via_serve.prompt, 0u);
  // Greedy replies and seeded summaries: the same history compacts to the same prompts through
  // either, so the prompts agree to the token and the ratios within noise.
  EXPECT_EQ(via_serve.prompt, via_up.prompt);
  EXPECT_LE(via_serve.prefilled_ratio(), via_up.prefilled_ratio() * 1.2 + 0.02);
  EXPECT_LT(via_serve.prefilled_ratio(), 0.5);
}

TEST_F(ServeE2eTest, TheServerGoingAwayIsA503AndItsReturnIsServed) {
  const uint16_t engine_port = free_port();
  start_engine(engine_port, /*stable=*/false, 8192, /*reuse=*/false);
  const uint16_t serve_port = free_port();
  testing::UpProcess serve({"--upstream", fmt::format("http://127.0.0.1:{}/", engine_port), "--upstream-key",
                            kEngineKey, "--listen", fmt::format("127.0.0.1:{}", serve_port), "--state-dir", "none",
                            "--health-interval", "1s"},
                           {}, "serve");
  ASSERT_TRUE(serve.wait_ready()) << serve.output();
  // The model's own template: kvgate says what it costs and what to do.
  EXPECT_NE(
      serve.output().find("its chat template renders an earlier reply differently once a new user message "
                          "follows"),
      std::string::npos)
      << serve.output();
  EXPECT_NE(serve.output().find("kvgate inspect MODEL.gguf --stable-template"), std::string::npos);
  // Without --cache-reuse the server computes a deleted-from prompt again, and kvgate says so.
  EXPECT_NE(serve.output().find("cached chunks after a deletion: computed again"), std::string::npos)
      << serve.output();
  httplib::Client c("127.0.0.1", serve_port);
  c.set_read_timeout(120, 0);
  const std::string body = R"({"messages":[{"role":"user","content":"hello"}],"max_tokens":4})";
  auto ok = c.Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  engine_->stop();
  engine_.reset();
  ASSERT_TRUE(serve.wait_for("is not answering /health", std::chrono::seconds(20))) << serve.output();
  auto down = c.Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->status, 503) << down->body;
  EXPECT_FALSE(down->get_header_value("Retry-After").empty());
  start_engine(engine_port);
  ASSERT_TRUE(serve.wait_for("answers again", std::chrono::seconds(60))) << serve.output();
  auto back = c.Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, 200) << back->body;
}

// A user turn of about 1,500 bytes of varied words.
std::string words_for_turn(int turn) {
  static const char* const kWords[] = {
      "river",  "engine", "cache",   "window", "planet",  "garden",  "signal", "marble", "copper", "lantern",
      "harbor", "meadow", "thunder", "velvet", "compass", "orchard", "quartz", "saddle", "timber", "voyage"};
  std::string out = fmt::format("Turn {}:", turn);
  uint32_t x = 2654435761u * static_cast<uint32_t>(turn + 1);
  while (out.size() < 1500) {
    x = x * 1664525u + 1013904223u;
    out += ' ';
    out += kWords[(x >> 16) % std::size(kWords)];
  }
  return out;
}

// A server that cannot count (no /apply-template, /tokenize: as vLLM and SGLang) with the
// real engine behind: kvgate estimates each prompt from its size at the rate the engine's own
// answers showed, so a conversation that outgrows the context is compacted at the watermark
// before the engine would refuse it, never after.
// kvgate serve in front of the server on `upstream_port`, listening on `listen_port`.
std::vector<std::string> serve_args(uint16_t upstream_port, uint16_t listen_port) {
  return {"--upstream", fmt::format("http://127.0.0.1:{}", upstream_port), "--upstream-key", kEngineKey,
          "--listen",   fmt::format("127.0.0.1:{}", listen_port),          "--state-dir",    "none"};
}

// Sixteen turns of ~1.5 KB each through kvgate serve on `port` (a 4096-token context fills
// twice over): whether each was answered, and the largest prompt the engine saw.
struct LongConversation {
  int failed = 0;
  uint64_t largest_prompt = 0;
  int watermark_compactions = 0;
  int overflow_compactions = 0;
  int raw_rescues = 0;
};

LongConversation sixteen_long_turns(uint16_t port) {
  LongConversation out;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  json messages = json::array({{{"role", "system"}, {"content", "You are a terse assistant."}}});
  for (int turn = 1; turn <= 16; ++turn) {
    messages.push_back({{"role", "user"}, {"content", words_for_turn(turn)}});
    const json body = {{"messages", messages}, {"max_tokens", 16}, {"stream", false}};
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    if (!r || r->status != 200) {
      ++out.failed;
      ADD_FAILURE() << "turn " << turn << ": " << (r ? r->body : httplib::to_string(r.error()));
      break;
    }
    const json j = json::parse(r->body);
    // A reply rescued raw from a server that cannot replay it has no usage (kvgate.raw).
    const uint64_t prompt = j.value("usage", json::object()).value("prompt_tokens", uint64_t{0});
    out.largest_prompt = std::max(out.largest_prompt, prompt);
    out.raw_rescues += j.value("kvgate", json::object()).value("raw", false);
    messages.push_back({{"role", "assistant"}, {"content", j["choices"][0]["message"].value("content", "")}});
  }
  return out;
}

void count_compactions(testing::UpProcess& serve, LongConversation& out) {
  for (const json& ev : serve.events("compaction")) {
    const std::string trigger = ev.value("trigger", "");
    out.watermark_compactions += trigger == "watermark";
    out.overflow_compactions += trigger == "overflow";
  }
}

TEST_F(ServeE2eTest, WithoutTheServersCountingACompactionComesFromALearnedEstimateBeforeAnyRefusal) {
  const uint16_t engine_port = free_port();
  start_engine(engine_port, true, 4096);
  testing::FilteringProxy proxy(engine_port, {"/apply-template", "/tokenize", "/detokenize"});
  const uint16_t serve_port = free_port();
  testing::UpProcess serve(serve_args(proxy.port(), serve_port), {}, "serve");
  ASSERT_TRUE(serve.wait_ready()) << serve.output();
  EXPECT_NE(serve.output().find("1 slot of 4096 tokens each"), std::string::npos) << serve.output();
  EXPECT_NE(serve.output().find("a prompt's tokens are estimated from its size"), std::string::npos)
      << serve.output();
  LongConversation run = sixteen_long_turns(serve_port);
  EXPECT_EQ(run.failed, 0);
  EXPECT_GT(proxy.hits("/apply-template"), 0);  // asked, and refused
  EXPECT_GT(proxy.hits("/v1/chat/completions"), 0);
  count_compactions(serve, run);
  std::printf(
      "[figures] 16 turns of ~1.5 KB: %d watermark compaction(s), %d after a refusal, largest prompt %llu "
      "of 4096\n",
      run.watermark_compactions, run.overflow_compactions,
      static_cast<unsigned long long>(run.largest_prompt));
  EXPECT_GE(run.watermark_compactions, 1) << serve.output();
  EXPECT_EQ(run.overflow_compactions, 0) << serve.output();
  httplib::Client c("127.0.0.1", serve_port);
  auto status = c.Get("/kvgate/v1/status");
  ASSERT_TRUE(status && status->status == 200);
  const json acc = json::parse(status->body)["token_accounting"];
  EXPECT_EQ(acc["estimated"], true) << acc;
  ASSERT_TRUE(acc["estimate_tokens_per_unit"].is_number()) << acc;
  EXPECT_GT(acc["estimate_tokens_per_unit"].get<double>(), 0.05);
  EXPECT_LT(acc["estimate_tokens_per_unit"].get<double>(), 1.0);
}

// A server shaped like vLLM where kvgate reads it (testing::vllm_answers over the real engine:
// no /props, no /apply-template; /v1/models with max_model_len; /tokenize of chat messages):
// kvgate counts each prompt exactly with that /tokenize, and every count equals the tokens
// the engine then reports for the prompt.
TEST_F(ServeE2eTest, AServerThatTokenizesChatMessagesCountsEveryPromptExactly) {
  const uint16_t engine_port = free_port();
  start_engine(engine_port, true, 4096);
  testing::FilteringProxy proxy(engine_port, {"/apply-template", "/detokenize", "/props", "/slots"},
                                testing::vllm_answers(4096, "tiny-qwen3"));
  const uint16_t serve_port = free_port();
  testing::UpProcess serve(serve_args(proxy.port(), serve_port), {}, "serve");
  ASSERT_TRUE(serve.wait_ready()) << serve.output();
  EXPECT_NE(serve.output().find("a vllm server"), std::string::npos) << serve.output();
  EXPECT_NE(serve.output().find("of 4096 tokens each"), std::string::npos) << serve.output();
  EXPECT_NE(serve.output().find("exact (the server's /tokenize of the chat messages"), std::string::npos)
      << serve.output();
  LongConversation run = sixteen_long_turns(serve_port);
  EXPECT_EQ(run.failed, 0);
  count_compactions(serve, run);
  int counted = 0, equal = 0;
  for (const json& ev : serve.events("request")) {
    const uint64_t c = ev.value("counted_tokens", uint64_t{0}), p = ev.value("prompt_tokens", uint64_t{0});
    if (c == 0 || p == 0) continue;
    ++counted;
    equal += c == p;
    EXPECT_EQ(c, p) << ev;
  }
  std::printf(
      "[figures] 16 turns of ~1.5 KB counted by /tokenize of the messages: %d of %d counts equal to the "
      "engine's, %d watermark compaction(s), %d after a refusal, largest prompt %llu of 4096, %d reply(s) "
      "rescued raw\n",
      equal, counted, run.watermark_compactions, run.overflow_compactions,
      static_cast<unsigned long long>(run.largest_prompt), run.raw_rescues);
  EXPECT_GE(counted, 3);
  EXPECT_GE(run.watermark_compactions, 1) << serve.output();
  EXPECT_EQ(run.overflow_compactions, 0) << serve.output();
  EXPECT_GT(proxy.hits("/tokenize"), counted);  // the probe, and every count
  httplib::Client c("127.0.0.1", serve_port);
  auto status = c.Get("/kvgate/v1/status");
  ASSERT_TRUE(status && status->status == 200);
  const json acc = json::parse(status->body)["token_accounting"];
  EXPECT_EQ(acc["counting"], "chat-tokenize") << acc;
  EXPECT_EQ(acc["mismatches"], 0) << acc;
}

TEST_F(ServeE2eTest, BadUpstreamsAndEngineOptionsAreClearErrors) {
  auto run = [](std::vector<std::string> args, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    testing::UpProcess p(std::move(args), {}, "serve");
    const int code = p.wait_exit(timeout);
    return std::make_pair(code, p.output());
  };
  const std::string listen = fmt::format("127.0.0.1:{}", free_port());
  auto [no_upstream, o1] = run({"--listen", listen});
  EXPECT_EQ(no_upstream, 2);
  EXPECT_NE(o1.find("give --upstream"), std::string::npos) << o1;
  auto [https, o2] = run({"--upstream", "https://127.0.0.1:1"});
  EXPECT_EQ(https, 2);
  EXPECT_NE(o2.find("https is not supported"), std::string::npos) << o2;
  auto [path, o3] = run({"--upstream", "http://127.0.0.1:8080/v1"});
  EXPECT_EQ(path, 2);
  EXPECT_NE(o3.find("without a path"), std::string::npos) << o3;
  auto [engine_option, o4] = run({"--upstream", "http://127.0.0.1:8080", "--ctx", "4096"});
  EXPECT_EQ(engine_option, 2) << o4;  // an engine option: kvgate serve starts no engine
  // The key: a server that wants one refuses without it.
  const uint16_t engine_port = free_port();
  start_engine(engine_port);
  auto [no_key, o5] = run({"--upstream", fmt::format("http://127.0.0.1:{}", engine_port), "--listen", listen,
                           "--state-dir", "none"},
                          std::chrono::seconds(120));
  EXPECT_EQ(no_key, 1);
  EXPECT_NE(o5.find("refused the key (401): give --upstream-key"), std::string::npos) << o5;
}

}  // namespace
}  // namespace kvgate::cli
