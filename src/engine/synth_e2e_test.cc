// End to end: every architecture `kvgate synth` writes is loaded and served by the real
// pinned llama-server, and our GGUF reader agrees with the engine's own account of the
// metadata (its `print_info:` lines at -lv 4).
#include <cmath>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/pinned.h"
#include "engine/server_process.h"
#include "gguf/file.h"
#include "gguf/synth.h"
#include "testing/engines_under_test.h"

namespace kvgate::engine {
namespace {

using nlohmann::json;

struct Case {
  std::string label;
  gguf::SynthSpec spec;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

std::vector<Case> cases() {
  std::vector<Case> out;
  for (auto arch : gguf::synth_architectures()) out.push_back({std::string(arch), *gguf::synth_defaults(arch)});
  {
    auto s = *gguf::synth_defaults("qwen3");
    s.n_head = 8;
    s.n_head_kv = 1;  // MQA
    s.head_dim = 64;
    s.weight_type = gguf::GgmlType::Q8_0;
    out.push_back({"qwen3_mqa_q8_0", s});
  }
  {
    auto s = *gguf::synth_defaults("qwen35");
    s.interval = 2;
    s.n_layer = 6;
    s.ssm_state = 16;
    s.ssm_groups = 1;
    s.ssm_dt_rank = 2;
    s.weight_type = gguf::GgmlType::F32;
    out.push_back({"qwen35_interval2_f32", s});
  }
  {
    auto s = *gguf::synth_defaults("qwen35");
    s.weight_type = gguf::GgmlType::Q4_0;
    out.push_back({"qwen35_q4_0", s});
  }
  {
    auto s = *gguf::synth_defaults("gemma3");
    s.swa_window = 64;
    s.swa_pattern = 3;
    s.n_layer = 7;
    out.push_back({"gemma3_pattern3", s});
  }
  return out;
}

std::map<std::string, std::string> print_info(const std::vector<std::string>& lines) {
  static const std::regex re(R"(print_info: (\S[^=]*?)\s*= (.*?)\s*$)");
  std::map<std::string, std::string> out;
  std::smatch m;
  for (const auto& l : lines) {
    if (std::regex_search(l, m, re) && !out.count(m[1])) out[m[1]] = m[2];
  }
  return out;
}

class SynthE2eTest : public ::testing::TestWithParam<Case> {};

TEST_P(SynthE2eTest, EngineLoadsServesAndAgreesOnMetadata) {
  const Case& c = GetParam();
  auto server_bin = resolve_server();
  ASSERT_TRUE(server_bin.ok()) << server_bin.error().message();
  auto vocab_path = vocab_file("qwen2");
  ASSERT_TRUE(vocab_path.ok()) << vocab_path.error().message();
  auto vocab = gguf::File::open(*vocab_path);
  ASSERT_TRUE(vocab.ok());

  const auto path = std::filesystem::temp_directory_path() / fmt::format("kvgate_e2e_{}_{}.gguf", c.label, ::getpid());
  auto written = gguf::synthesize(c.spec, &*vocab, path);
  ASSERT_TRUE(written.ok()) << written.error().message();
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();

  auto server = ServerProcess::start(
      {.binary = *server_bin,
       .args = {"-m", path.string(), "-c", "2048", "-np", "1", "-lv", "4", "-t", testing::engine_threads()}});
  ASSERT_TRUE(server.ok()) << server.error().message();
  auto ready = (*server)->wait_ready(std::chrono::seconds(60));
  ASSERT_TRUE(ready.ok()) << ready.error().message();

  // A chat completion. The weights are random, so constrain the output to plain words to
  // keep the engine's chat-output parser happy.
  httplib::Client client((*server)->host(), (*server)->port());
  client.set_read_timeout(std::chrono::seconds(60));
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Say something."}}})},
               {"max_tokens", 8},
               {"grammar", "root ::= [a-z]+ (\" \" [a-z]+)*"}};
  auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res) << "no HTTP answer";
  ASSERT_EQ(res->status, 200) << res->body;
  auto reply = json::parse(res->body);
  EXPECT_TRUE(reply["choices"][0]["message"]["content"].is_string()) << res->body;
  EXPECT_GT(reply["usage"]["completion_tokens"].get<int>(), 0);

  // Our reader vs the engine's print_info lines.
  (*server)->stop();
  auto info = print_info((*server)->log_lines());
  ASSERT_FALSE(info.empty()) << "no print_info lines; log:\n" << (*server)->log_tail(40);
  const std::string a(file->architecture());
  auto u = [&](std::string_view key) { return std::to_string(file->get_uint(a + "." + std::string(key)).value_or(0)); };
  EXPECT_EQ(info["arch"], a);
  EXPECT_EQ(info["n_ctx_train"], u("context_length"));
  EXPECT_EQ(info["n_embd"], u("embedding_length"));
  EXPECT_EQ(info["n_layer"], u("block_count"));
  EXPECT_EQ(info["n_head"], u("attention.head_count"));
  EXPECT_EQ(info["n_head_kv"], u("attention.head_count_kv"));
  EXPECT_EQ(info["n_embd_head_k"], u("attention.key_length"));
  EXPECT_EQ(info["n_embd_head_v"], u("attention.value_length"));
  EXPECT_EQ(info["n_ff"], u("feed_forward_length"));
  EXPECT_EQ(info["n_rot"], u("rope.dimension_count"));
  EXPECT_EQ(info["general.name"], std::string(*file->get_string("general.name")));
  EXPECT_EQ(info["n_vocab"], std::to_string(file->find("tokenizer.ggml.tokens")->size()));
  EXPECT_EQ(info["n_merges"], std::to_string(file->find("tokenizer.ggml.merges")->size()));
  if (a == "gemma3") {
    EXPECT_EQ(info["n_swa"], u("attention.sliding_window"));
    EXPECT_EQ(info["is_swa_any"], "1");
  } else {
    EXPECT_EQ(info["n_swa"], "0");
  }
  if (a == "qwen35") {
    EXPECT_EQ(info["ssm_d_conv"], u("ssm.conv_kernel"));
    EXPECT_EQ(info["ssm_d_inner"], u("ssm.inner_size"));
    EXPECT_EQ(info["ssm_d_state"], u("ssm.state_size"));
    EXPECT_EQ(info["ssm_dt_rank"], u("ssm.time_step_rank"));
    EXPECT_EQ(info["ssm_n_group"], u("ssm.group_count"));
    auto sections = *file->find(a + ".rope.dimension_sections")->as_int_array();
    EXPECT_EQ(info["mrope sections"], fmt::format("[{}]", fmt::join(sections, ", ")));
  }
  uint64_t params = 0;
  for (const auto& t : file->tensors()) params += t.n_elements;
  EXPECT_EQ(info["model params"], fmt::format("{:.2f} M", static_cast<double>(params) / 1e6));
  // The engine's "file size" is the tensor data: "39.89 MiB (16.01 BPW)".
  EXPECT_EQ(info["file size"].substr(0, info["file size"].find(" MiB")),
            fmt::format("{:.2f}", static_cast<double>(file->tensor_bytes()) / 1024.0 / 1024.0));
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Architectures, SynthE2eTest, ::testing::ValuesIn(cases()),
                         [](const auto& param_info) { return param_info.param.label; });

}  // namespace
}  // namespace kvgate::engine
