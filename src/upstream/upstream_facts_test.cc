#include "upstream/upstream_facts.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include "testing/paths.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

json fixture(const std::string& fork) {
  std::ifstream in(std::string(kvgate::testing::source_dir()) + "/tests/fixtures/" + fork + "/props.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// Both recorded from `llama-server -m kvgate-default-qwen3.gguf -c 4096 -np 2`.
TEST(UpstreamFactsTest, MainlineProps) {
  const UpstreamFacts f = read_props(fixture("mainline"));
  EXPECT_EQ(f.n_ctx_slot, 2048u);
  EXPECT_EQ(f.slots, 2);
  EXPECT_EQ(f.fork, plan::Fork::kMainline);
  EXPECT_EQ(f.build, "b1-80fb11a");
  EXPECT_NE(f.model.find("kvgate-default-qwen3.gguf"), std::string::npos);
  EXPECT_TRUE(f.unknown.empty());
}

TEST(UpstreamFactsTest, IkProps) {
  const UpstreamFacts f = read_props(fixture("ik"));
  EXPECT_EQ(f.n_ctx_slot, 2048u);
  EXPECT_EQ(f.slots, 2);
  EXPECT_EQ(f.fork, plan::Fork::kIk);
  EXPECT_EQ(f.build, "");
  EXPECT_TRUE(f.unknown.empty());
}

TEST(UpstreamFactsTest, WhatIsMissingIsNamed) {
  json ik = fixture("ik");
  ik.erase("default_generation_settings");  // then n_ctx over the slots
  EXPECT_EQ(read_props(ik).n_ctx_slot, 2048u);
  const UpstreamFacts none = read_props(json{{"model_alias", "m"}});
  EXPECT_FALSE(none.n_ctx_slot || none.slots || none.fork);
  EXPECT_EQ(none.unknown, (std::vector<std::string>{"context", "slots", "fork"}));
  EXPECT_EQ(none.model, "m");
  EXPECT_EQ(read_props(json::array()).unknown.size(), 3u);
  EXPECT_FALSE(read_props(json{{"total_slots", -1}, {"default_generation_settings", {{"n_ctx", "x"}}}}).slots);
}

// The model list of a server with no /props: vLLM's and SGLang's cards say max_model_len.
TEST(UpstreamFactsTest, AModelListGivesTheContextWherePropsSaidNothing) {
  UpstreamFacts f = read_props(json());
  read_models(
      json::parse(R"({"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","owned_by":"vllm",
                                "root":"Qwen/Qwen3-8B","max_model_len":32768}]})"),
      f);
  EXPECT_EQ(f.n_ctx_slot, 32768u);
  EXPECT_EQ(f.server, "vllm");
  EXPECT_EQ(f.model, "Qwen/Qwen3-8B");
  EXPECT_EQ(f.unknown, (std::vector<std::string>{"slots", "fork"}));
  // /props' own figure wins; a card without the field, or no cards, change nothing.
  UpstreamFacts mainline = read_props(fixture("mainline"));
  read_models(json::parse(R"({"data":[{"id":"m","owned_by":"llamacpp","max_model_len":99}]})"), mainline);
  EXPECT_EQ(mainline.n_ctx_slot, 2048u);
  EXPECT_EQ(mainline.server, "llamacpp");
  UpstreamFacts none = read_props(json());
  read_models(json::parse(R"({"data":[{"id":"m"}]})"), none);
  read_models(json::parse(R"({"data":[]})"), none);
  read_models(json::array(), none);
  EXPECT_FALSE(none.n_ctx_slot);
  EXPECT_EQ(none.unknown.size(), 3u);
}

}  // namespace
}  // namespace kvgate::gateway
