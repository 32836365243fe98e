// Verification on live logs of the pinned engine: the verifier is fed the server's output
// line by line as it arrives (the way the supervisor uses it), reports the log complete
// before the server is ready, finds nothing when the server runs as planned, and names the
// difference when it does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "engine/e2e_support.h"
#include "engine/pinned.h"
#include "engine/server_process.h"
#include "engine/verify.h"
#include "gguf/file.h"
#include "plan/model_desc.h"

namespace kvgate::engine {
namespace {

struct LiveResult {
  Comparison at_ready;
  bool complete_at_ready = false;
  StartupFacts facts;
};

LiveResult run_live(const std::filesystem::path& model, std::optional<Expectation> expected,
                    const std::vector<std::string>& args) {
  LiveResult out;
  auto binary = resolve_server();
  EXPECT_TRUE(binary.ok()) << binary.error().message();
  if (!binary.ok()) return out;
  std::mutex mu;
  StartupVerifier verifier(std::move(expected));
  std::vector<std::string> argv = {"-m", model.string(), "-t", "2", "--no-warmup", "-fit", "off"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto server = ServerProcess::start({.binary = *binary, .args = argv, .on_line = [&](std::string_view line) {
                                        std::lock_guard lock(mu);
                                        verifier.feed(line);
                                      }});
  EXPECT_TRUE(server.ok()) << server.error().message();
  if (!server.ok()) return out;
  auto ready = (*server)->wait_ready(std::chrono::seconds(60));
  EXPECT_TRUE(ready.ok()) << ready.error().message();
  {
    std::lock_guard lock(mu);
    out.complete_at_ready = verifier.complete();
    out.at_ready = verifier.finish();
    out.facts = verifier.facts();
  }
  (*server)->signal(SIGKILL);
  (*server)->stop(std::chrono::seconds(5));
  return out;
}

bool has(const Comparison& c, std::string_view code) {
  return std::any_of(c.findings.begin(), c.findings.end(), [&](const Finding& f) { return f.code == code; });
}

std::string dump(const Comparison& c) {
  std::string out;
  for (const auto& f : c.findings) out += std::string(severity_name(f.severity)) + " " + f.code + ": " + f.message + "\n";
  return out;
}

class DoctorLiveE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = e2e::TempModel::synthesize(*gguf::synth_defaults("gemma3"), "doctor");
    ASSERT_TRUE(m.ok()) << m.error().message();
    model_ = new e2e::TempModel(std::move(*m));
    auto file = gguf::File::open(model_->path());
    ASSERT_TRUE(file.ok());
    auto d = plan::describe_model(*file);
    ASSERT_TRUE(d.ok());
    desc_ = new plan::ModelDescriptor(std::move(*d));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete desc_;
  }
  static Expectation expect(const plan::ServerSettings& s) {
    auto p = plan::plan_memory(*desc_, s, {.has_accelerator = false});
    EXPECT_TRUE(p.ok()) << p.error().message();
    return expectation_from_plan(*p, s);
  }
  static plan::ServerSettings settings() {
    plan::ServerSettings s;
    s.ctx = 8192;
    s.parallel = 2;
    s.cache_type_k = s.cache_type_v = "q8_0";
    s.flash_attn = plan::FlashAttn::kOn;
    return s;
  }
  static const std::vector<std::string> args(const char* ctx, const char* type) {
    return {"-lv", "4", "-c", ctx, "-np", "2", "-ctk", type, "-ctv", type, "-fa", "on"};
  }
  static e2e::TempModel* model_;
  static plan::ModelDescriptor* desc_;
};
e2e::TempModel* DoctorLiveE2eTest::model_ = nullptr;
plan::ModelDescriptor* DoctorLiveE2eTest::desc_ = nullptr;

TEST_F(DoctorLiveE2eTest, AsPlannedNothingToReport) {
  LiveResult r = run_live(model_->path(), expect(settings()), args("8192", "q8_0"));
  EXPECT_TRUE(r.complete_at_ready);
  EXPECT_TRUE(r.at_ready.findings.empty()) << dump(r.at_ready);
  EXPECT_EQ(r.facts.kv_caches.size(), 2u) << "both sliding-window caches";
}

TEST_F(DoctorLiveE2eTest, WrongTypeAndSmallerContextAreFindings) {
  LiveResult r = run_live(model_->path(), expect(settings()), args("4096", "q4_0"));
  EXPECT_TRUE(r.at_ready.has_errors());
  EXPECT_TRUE(has(r.at_ready, "kv_type_mismatch")) << dump(r.at_ready);
  EXPECT_TRUE(has(r.at_ready, "context_smaller")) << dump(r.at_ready);
  EXPECT_TRUE(has(r.at_ready, "fewer_cells")) << dump(r.at_ready);
  EXPECT_TRUE(has(r.at_ready, "kv_smaller_than_planned")) << dump(r.at_ready);
}

TEST_F(DoctorLiveE2eTest, DefaultVerbosityIsNamed) {
  LiveResult r = run_live(model_->path(), expect(settings()), {"-c", "8192", "-np", "2"});
  EXPECT_FALSE(r.complete_at_ready);
  EXPECT_TRUE(has(r.at_ready, "no_allocation_lines")) << dump(r.at_ready);
  bool names_lv4 = false;
  for (const auto& f : r.at_ready.findings) names_lv4 = names_lv4 || f.message.find("-lv 4") != std::string::npos;
  EXPECT_TRUE(names_lv4) << dump(r.at_ready);
}

}  // namespace
}  // namespace kvgate::engine
