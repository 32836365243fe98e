// Conversations' engine state saved and restored through kvgate (kv_keeper.h), against the
// real engines with --slot-save-path: conversations taking turns on one slot, the gateway
// started again over the same folder, and every way a file must not be restored.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "gguf/file.h"
#include "plan/engine_quirks.h"
#include "plan/memory_model.h"
#include "plan/model_desc.h"
#include "testing/engines_under_test.h"
#include "testing/fork_param.h"
#include "testing/gateway_e2e.h"

namespace kvgate::gateway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Engine;
using testing::Front;
using testing::post_json;

// The engines of this suite, by fork and architecture, each saving into its own folder.
struct SavingEngine {
  fs::path dir;
  bool recurrent = false;
  std::unique_ptr<Engine> engine;
  ~SavingEngine() {
    engine.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

SavingEngine& saving_engine(plan::Fork fork, const std::string& arch) {
  static std::map<std::pair<plan::Fork, std::string>, SavingEngine> engines;
  auto& e = engines[{fork, arch}];
  if (!e.engine) {
    e.dir = fs::temp_directory_path() / fmt::format("kvgate-kvstate-{}-{}-{}", ::getpid(), plan::fork_name(fork), arch);
    fs::remove_all(e.dir);
    fs::create_directories(e.dir);
    testing::EngineOptions o;
    o.fork = fork;
    o.spec = *gguf::synth_defaults(arch);
    // One slot and no host prompt cache: a conversation that loses the slot loses its cache.
    o.context = 16384;
    o.slots = 1;
    o.args = {"--cache-ram", "0", "--slot-save-path", e.dir.string()};
    e.engine = Engine::start(o);
    e.recurrent = arch == "qwen35";
  }
  testing::set_default_word_bias(e.engine->word_bias());
  for (const auto& entry : fs::directory_iterator(e.dir)) fs::remove_all(entry.path());  // each test starts empty
  return e;
}

// A long first message of its own per conversation (nothing shared between them), ~`words`*3 tokens.
std::string opening(int conversation, size_t words) {
  std::mt19937 rng(static_cast<uint32_t>(1000 + conversation));
  std::string text = fmt::format("Conversation {} begins.", conversation);
  for (size_t i = 0; i < words; ++i) text += fmt::format(" w{}", rng() % 500);
  return text;
}

struct Figures {
  uint64_t prompt = 0, cached = 0;
  double prefilled_share() const { return prompt == 0 ? 1.0 : static_cast<double>(prompt - cached) / static_cast<double>(prompt); }
};

// A client's conversation: sends its history and appends the answer and a new question.
class Client {
 public:
  Client(int id, size_t words) : id_(id) { messages_ = json::array({{{"role", "user"}, {"content", opening(id, words)}}}); }
  // One turn; false (and a test failure) when it was not answered.
  bool turn(httplib::Client& c, Figures& f, const httplib::Headers& headers = {}) {
    auto a = post_json(c, "/v1/chat/completions", testing::plain_chat(messages_, 8), headers);
    EXPECT_EQ(a.status, 200) << a.raw.substr(0, 400);
    if (a.status != 200) return false;
    f.prompt += a.body["usage"]["prompt_tokens"].get<uint64_t>();
    f.cached += a.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<uint64_t>();
    messages_.push_back(a.body["choices"][0]["message"]);
    messages_.push_back({{"role", "user"}, {"content", fmt::format("Turn {} of conversation {}: go on.", ++turns_, id_)}});
    return true;
  }
  json& messages() { return messages_; }

 private:
  int id_;
  int turns_ = 0;
  json messages_;
};

double metric(Front& f, const std::string& name) {
  auto c = f.client();
  auto m = c.Get("/metrics");
  if (!m) return -1;
  const std::string needle = "\nkvgate_" + name + " ";
  const size_t at = m->body.find(needle);
  return at == std::string::npos ? 0 : std::stod(m->body.substr(at + needle.size()));
}

class KvStateE2eTest : public ::testing::TestWithParam<plan::Fork> {
 protected:
  void SetUp() override {
    KVGATE_SKIP_WITHOUT_ENGINE(GetParam());
    if (!plan::slot_states_reliable(GetParam())) {
      GTEST_SKIP() << "kvgate keeps no engine state for this fork: its slot save/restore loses answers "
                      "(plan/engine_quirks.h: slot_states_reliable)";
    }
  }
  GatewayOptions options(const SavingEngine& e, bool keep_state, json identity = {{"test", "same"}}) const {
    GatewayOptions o;
    o.engine_fork = GetParam();
    if (keep_state) {
      o.kv.dir = e.dir;
      o.kv.disk_budget_bytes = 1ULL << 30;
      o.kv.identity = std::move(identity);
      o.kv.exact_prefix = e.recurrent;  // as kvgate up sets it for models with recurrent state
    }
    return o;
  }
  // Four conversations taking turns on the one slot for `rounds` rounds.
  Figures take_turns(SavingEngine& e, bool keep_state, int rounds) {
    Front f([&e] { return e.engine->endpoint(); }, options(e, keep_state));
    auto c = f.client();
    std::vector<Client> clients;
    for (int i = 0; i < 4; ++i) clients.emplace_back(100 * (keep_state ? 1 : 2) + i, 400);
    Figures all;
    for (int r = 0; r < rounds; ++r) {
      for (auto& client : clients) {
        if (!client.turn(c, all)) return all;
      }
    }
    std::printf("%s, state kept %s: %d rounds of 4 conversations on one slot: %llu prompt tokens, %llu cached, "
                "prefilled / prompt %.3f\n",
                plan::fork_name(GetParam()), keep_state ? "on" : "off", rounds,
                static_cast<unsigned long long>(all.prompt), static_cast<unsigned long long>(all.cached),
                all.prefilled_share());
    if (keep_state) {
      EXPECT_GT(metric(f, "kv_restores_total"), 4 * (rounds - 1) - 1);
      EXPECT_GT(metric(f, "kv_restored_tokens_reused_total"), 0);
    }
    return all;
  }
};
KVGATE_BOTH_ENGINES(KvStateE2eTest);

TEST_P(KvStateE2eTest, FourConversationsOnOneSlotAreRestoredInsteadOfPrefilled) {
  auto& e = saving_engine(GetParam(), "qwen3");
  const Figures without = take_turns(e, false, 4);
  const Figures with = take_turns(e, true, 20);
  EXPECT_GT(without.prefilled_share(), 0.8) << "without saved states every turn is prefilled again";
  EXPECT_LE(with.prefilled_share(), 0.15);
}

// A hybrid model (gated delta net + attention): its recurrent state travels in the file too.
TEST_P(KvStateE2eTest, FourConversationsOnOneSlotOfAHybridModel) {
  auto& e = saving_engine(GetParam(), "qwen35");
  const Figures without = take_turns(e, false, 3);
  const Figures with = take_turns(e, true, 20);
  EXPECT_GT(without.prefilled_share(), 0.8);
  EXPECT_LE(with.prefilled_share(), 0.15);
}

// The gateway started again over the same folder (as after kvgate itself was restarted): the
// conversation's state comes back when it was saved under the same identity, not otherwise;
// a file cut short is deleted, never handed to the engine.
TEST_P(KvStateE2eTest, AStateIsRestoredOnlyUnderTheSameIdentityAndIntact) {
  auto& e = saving_engine(GetParam(), "qwen3");
  const httplib::Headers conv = {{"X-Session-Id", fmt::format("identity-{}", plan::fork_name(GetParam()))}};
  Client client(7, 600);
  Figures first;
  {
    Front f([&e] { return e.engine->endpoint(); }, options(e, true));
    auto c = f.client();
    ASSERT_TRUE(client.turn(c, first, conv));
    Client other(8, 300);  // takes the slot: the first conversation's state is saved (if not yet)
    ASSERT_TRUE(other.turn(c, first));
    auto info = c.Get(fmt::format("/kvgate/v1/sessions/open~identity-{}", plan::fork_name(GetParam())));
    ASSERT_TRUE(info);
    json kv = json::parse(info->body)["kv_state"];
    ASSERT_TRUE(kv.is_object()) << info->body.substr(0, 600);
    EXPECT_GT(kv["tokens"].get<uint64_t>(), first.prompt / 2);
    EXPECT_GT(kv["bytes"].get<uint64_t>(), 0u);
  }
  auto next_turn = [&](json identity) {
    Front f([&e] { return e.engine->endpoint(); }, options(e, true, std::move(identity)));
    auto c = f.client();
    Client other(9, 300);  // the slot holds someone else again
    Figures ignored;
    EXPECT_TRUE(other.turn(c, ignored));
    Figures turn;
    json saved = client.messages();
    EXPECT_TRUE(client.turn(c, turn, conv));
    client.messages() = saved;  // the same turn again next time
    return std::make_pair(turn, metric(f, "kv_restores_total"));
  };
  auto [same, restores_same] = next_turn({{"test", "same"}});
  EXPECT_EQ(restores_same, 1);
  EXPECT_LT(same.prefilled_share(), 0.05) << same.prompt << " prompt, " << same.cached << " cached";

  // Cut the file short: refused and deleted; the engine keeps serving.
  size_t cut = 0;
  for (const auto& entry : fs::directory_iterator(e.dir)) {
    if (entry.path().extension() == ".state") {
      fs::resize_file(entry.path(), fs::file_size(entry.path()) / 2);
      ++cut;
    }
  }
  ASSERT_GT(cut, 0u);
  auto [truncated, restores_truncated] = next_turn({{"test", "same"}});
  EXPECT_EQ(restores_truncated, 0);
  EXPECT_GT(truncated.prefilled_share(), 0.9);
  EXPECT_EQ(e.engine->running(), true);

  // Saved under other settings (another model): never restored.
  auto [other_identity, restores_other] = next_turn({{"test", "another model"}});
  EXPECT_EQ(restores_other, 0);
  EXPECT_GT(other_identity.prefilled_share(), 0.9);
}

// The conversation changed what it starts with (its first message edited): the saved state
// holds another prompt and is not restored.
TEST_P(KvStateE2eTest, AChangedBeginningIsNotRestored) {
  auto& e = saving_engine(GetParam(), "qwen3");
  Front f([&e] { return e.engine->endpoint(); }, options(e, true));
  auto c = f.client();
  const httplib::Headers conv = {{"X-Session-Id", fmt::format("edited-{}", plan::fork_name(GetParam()))}};
  Client client(11, 300);
  Figures figures;
  ASSERT_TRUE(client.turn(c, figures, conv));
  Client other(12, 300);
  ASSERT_TRUE(other.turn(c, figures));
  // Edited: its first question and the answer to it (with the answer kept, kvgate would take the
  // request as the same conversation with its oldest turns dropped, and keep them).
  for (size_t i : {0u, 1u}) {
    client.messages()[i]["content"] = "An edited beginning. " + client.messages()[i]["content"].get<std::string>();
  }
  // Under its id, an edited beginning is another thread of the family (GATEWAY.md, "What a
  // client's id means"): the first thread's saved state is not restored into it, and nothing
  // of the other conversation's state is reused: the turn is prefilled.
  Figures edited;
  ASSERT_TRUE(client.turn(c, edited, conv));
  EXPECT_EQ(metric(f, "kv_restores_total"), 0);
  EXPECT_GT(edited.prefilled_share(), 0.9);
}

// What the engine writes is what the planner says a saved state takes (kvgate plan prints it).
TEST_P(KvStateE2eTest, ASavedStateIsTheSizeThePlannerSays) {
  for (const std::string arch : {"qwen3", "qwen35"}) {
    auto& e = saving_engine(GetParam(), arch);
    Front f([&e] { return e.engine->endpoint(); }, options(e, true));
    auto c = f.client();
    Figures ignored;
    Client a(51, 500), b(52, 300);
    ASSERT_TRUE(a.turn(c, ignored));
    ASSERT_TRUE(b.turn(c, ignored));
    auto file = gguf::File::open(e.engine->model());
    ASSERT_TRUE(file.ok());
    auto desc = plan::describe_model(*file);
    ASSERT_TRUE(desc.ok());
    plan::ServerSettings s;
    s.ctx = 16384;
    auto p = plan::plan_memory(*desc, s, {.fork = GetParam(), .has_accelerator = false});
    ASSERT_TRUE(p.ok()) << p.error().message();
    size_t checked = 0;
    for (const auto& entry : fs::directory_iterator(e.dir)) {
      if (entry.path().extension() != ".json") continue;
      std::ifstream in(entry.path());
      json rec = json::parse(in);
      const uint64_t planned = plan::saved_state_bytes(*p, rec["tokens"].get<uint32_t>());
      const uint64_t written = rec["bytes"].get<uint64_t>();
      std::printf("%s %s: %llu tokens saved in %llu bytes, planned %llu\n", plan::fork_name(GetParam()), arch.c_str(),
                  static_cast<unsigned long long>(rec["tokens"].get<uint64_t>()),
                  static_cast<unsigned long long>(written), static_cast<unsigned long long>(planned));
      EXPECT_NEAR(static_cast<double>(written), static_cast<double>(planned), 0.002 * static_cast<double>(written));
      ++checked;
    }
    EXPECT_GE(checked, 1u);
  }
}

// A budget smaller than three conversations' states keeps the folder within it.
TEST_P(KvStateE2eTest, TheDiskBudgetIsKept) {
  auto& e = saving_engine(GetParam(), "qwen3");
  GatewayOptions o = options(e, true);
  uint64_t one = 0;  // the size of one conversation's state, measured first
  {
    GatewayOptions probe = options(e, true);
    Front f([&e] { return e.engine->endpoint(); }, probe);
    auto c = f.client();
    Figures ignored;
    Client a(21, 300), b(22, 300);
    ASSERT_TRUE(a.turn(c, ignored));
    ASSERT_TRUE(b.turn(c, ignored));
  }
  for (const auto& entry : fs::directory_iterator(e.dir)) {
    if (entry.path().extension() == ".state") one = std::max<uint64_t>(one, fs::file_size(entry.path()));
  }
  ASSERT_GT(one, 0u);
  for (const auto& entry : fs::directory_iterator(e.dir)) fs::remove(entry.path());
  o.kv.disk_budget_bytes = one * 5 / 2;
  Front f([&e] { return e.engine->endpoint(); }, o);
  auto c = f.client();
  std::vector<Client> clients;
  for (int i = 0; i < 4; ++i) clients.emplace_back(30 + i, 300);
  Figures ignored;
  for (int r = 0; r < 2; ++r) {
    for (auto& client : clients) ASSERT_TRUE(client.turn(c, ignored));
  }
  // A turn's state is saved after its answer was sent: the last save (written under a
  // temporary name, then the oldest states evicted) may still be under way. Wait for it.
  uint64_t on_disk = 0;
  for (int i = 0; i < 300; ++i) {
    on_disk = 0;
    bool saving = false;
    for (const auto& entry : fs::directory_iterator(e.dir)) {
      on_disk += fs::file_size(entry.path());
      saving = saving || entry.path().filename().string().starts_with("tmp-");
    }
    if (!saving && on_disk <= o.kv.disk_budget_bytes + 64 * 1024) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_LE(metric(f, "kv_state_bytes"), static_cast<double>(o.kv.disk_budget_bytes));
  EXPECT_GE(metric(f, "kv_state_evictions_total"), 1);
  EXPECT_LE(on_disk, o.kv.disk_budget_bytes + 64 * 1024) << "states plus their small records";
}

// A raw completion goes to a slot the engine chooses (here the only one): the conversation that
// held it is restored on its next turn, not taken as still cached.
TEST_P(KvStateE2eTest, AConversationIsRestoredAfterARawCompletionUsedItsSlot) {
  auto& e = saving_engine(GetParam(), "qwen3");
  Front f([&e] { return e.engine->endpoint(); }, options(e, true));
  auto c = f.client();
  Client a(61, 400);
  Figures first, next;
  ASSERT_TRUE(a.turn(c, first));
  auto raw = post_json(c, "/v1/completions", {{"prompt", "Something else entirely."}, {"max_tokens", 2}});
  ASSERT_EQ(raw.status, 200) << raw.raw.substr(0, 300);
  ASSERT_TRUE(a.turn(c, next));
  EXPECT_EQ(metric(f, "kv_restores_total"), 1);
  EXPECT_LT(next.prefilled_share(), 0.1) << next.prompt << " prompt, " << next.cached << " cached";
}

// The engine cannot write its file (the folder is gone, a file in its place): every answer
// still arrives; only the saves fail.
TEST_P(KvStateE2eTest, ASaveThatFailsCostsNoAnswer) {
  auto& e = saving_engine(GetParam(), "qwen3");
  Front f([&e] { return e.engine->endpoint(); }, options(e, true));
  auto c = f.client();
  fs::remove_all(e.dir);
  std::ofstream(e.dir) << "not a folder";
  Figures figures;
  Client a(41, 200), b(42, 200);
  EXPECT_TRUE(a.turn(c, figures));
  EXPECT_TRUE(b.turn(c, figures));
  EXPECT_TRUE(a.turn(c, figures));
  fs::remove(e.dir);
  fs::create_directories(e.dir);
  EXPECT_GE(metric(f, "kv_save_failures_total"), 1);
  EXPECT_EQ(metric(f, "kv_restores_total"), 0);
}

}  // namespace
}  // namespace kvgate::gateway
