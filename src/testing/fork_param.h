// End-to-end suites parameterised over the engine: every case runs against the pinned
// mainline build and against the real ik_llama.cpp build (skipped, saying why, where none is
// available: testing/engines_under_test.h). One engine per fork is started lazily per suite
// and shared by its cases.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "testing/engines_under_test.h"
#include "testing/gateway_e2e.h"

namespace kvgate::testing {

using gateway::GatewayOptions;

inline std::string fork_test_name(const ::testing::TestParamInfo<plan::Fork>& info) {
  return plan::fork_name(info.param);
}

#define KVGATE_BOTH_ENGINES(Suite)                                                                 \
  INSTANTIATE_TEST_SUITE_P(Engines, Suite, ::testing::Values(plan::Fork::kMainline, plan::Fork::kIk), \
                           ::kvgate::testing::fork_test_name)

// Skips the current test when `fork` is ik and no ik build is available.
#define KVGATE_SKIP_WITHOUT_ENGINE(fork)                                           \
  do {                                                                             \
    if ((fork) == plan::Fork::kIk && !::kvgate::testing::ik_server_under_test()) {  \
      GTEST_SKIP() << ::kvgate::testing::kIkAbsent;                                 \
    }                                                                              \
  } while (0)

// The engines of one suite, by fork, started on first use with `options` (fork set per call).
class SharedEngines {
 public:
  explicit SharedEngines(EngineOptions options) : options_(std::move(options)) {}
  Engine& get(plan::Fork fork) {
    auto& e = engines_[fork];
    if (!e) {
      EngineOptions o = options_;
      o.fork = fork;
      e = Engine::start(o);
    }
    set_default_word_bias(e->word_bias());
    return *e;
  }
  void reset() { engines_.clear(); }

 private:
  EngineOptions options_;
  std::map<plan::Fork, std::unique_ptr<Engine>> engines_;
};

// A suite parameterised over the engine, with one engine per fork shared by its cases:
// `Suite` (CRTP) provides `static EngineOptions engine_options()`. `engine_` is static so
// the suite's static helpers reach it too.
template <typename Suite>
class EngineSuite : public ::testing::TestWithParam<plan::Fork> {
 protected:
  static void TearDownTestSuite() { engines_.reset(); }
  void SetUp() override {
    KVGATE_SKIP_WITHOUT_ENGINE(GetParam());
    engine_ = &engines_.get(GetParam());
  }
  // Gateway options for the engine under test.
  GatewayOptions with_fork(GatewayOptions o = {}) const {
    o.engine_fork = GetParam();
    return o;
  }
  static inline SharedEngines engines_{Suite::engine_options()};
  static inline Engine* engine_ = nullptr;
};

}  // namespace kvgate::testing
