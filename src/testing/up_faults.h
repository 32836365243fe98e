// Test support for the fault suites of `kvgate up` (src/cli/up_*faults_e2e_test.cc): a test
// fixture that writes a model, starts the real kvgate binary on it with quick supervisor
// timings, and talks to it as a client; and the store check those suites end with.
//
// Thread-safety: for the test's thread (UpProcess collects kvgate's output on its own).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/synth.h"
#include "testing/fault_support.h"
#include "testing/gateway_e2e.h"
#include "testing/up_test_support.h"
#include "util/time.h"

namespace kvgate::testing {

using FaultClock = std::chrono::steady_clock;
using util::ms_since;

// A system prompt and `turns` user turns tagged "[tag]" (with "fine" answers between them).
nlohmann::json conversation(const std::string& tag, int turns);
// What a client saw: "200", "500 code", or "connection broken".
std::string kind_of(const JsonAnswer& answer);

// Its helpers are public so that a case's own helper classes can drive it.
class UpFaultsTest : public ::testing::Test {
 public:
  void SetUp() override;
  void TearDown() override;

  // Writes `spec` (with the release's qwen2 vocabulary) into the test's folder.
  std::filesystem::path synth(const gguf::SynthSpec& spec, const std::string& name = "m.gguf");
  // kvgate up's arguments: quick supervisor timings; `extra` adds or overrides options.
  std::vector<std::string> args(const std::filesystem::path& model, std::vector<std::string> extra = {});
  // Starts kvgate (after `prefix`, e.g. a private mount namespace) and waits until it serves.
  void start(std::vector<std::string> a, std::vector<std::string> prefix = {});

  nlohmann::json body(const nlohmann::json& messages, int max_tokens = 8);
  // A non-streamed chat turn; status 0 when the connection broke.
  JsonAnswer chat(const nlohmann::json& messages, int max_tokens = 8);
  nlohmann::json health();
  nlohmann::json status();

  // Waits until kvgate has logged at least `n` request events (a request's line is written
  // after its answer, so it may still be on its way when the client has the answer).
  size_t wait_events(size_t n);
  // The first request event after the first `before` ones; with `messages`, the first of them
  // for a request of that many messages (so a late line of an earlier request is passed over).
  nlohmann::json next_request_event(size_t before, std::optional<size_t> messages = std::nullopt);

  // Mounts an ext4 image at dir_/state inside a private mount namespace in which kvgate runs
  // (the prefix for UpProcess). Empty when not permitted here.
  std::vector<std::string> private_state_mount(const std::string& size = "16M");
  // Runs `command` inside kvgate's mount namespace.
  int in_namespace(const std::string& command);
  // After kvgate was killed: waits until the image is mounted nowhere (every process of the
  // old namespace, the engine included, has exited and the loop device was let go), so that
  // the next start mounts it afresh. A mount of an image still attached reuses its loop
  // device and with it the old mount's state (read-only after an ext4 error). False after
  // 60 s.
  bool wait_image_released();

  std::vector<std::string> server_args_;  // --server BIN for another engine than the pinned one
  std::filesystem::path dir_;
  uint16_t port_ = 0;
  std::unique_ptr<UpProcess> up_;
  nlohmann::json bias_ = nlohmann::json::array();
  std::string mounted_image_;

 private:
  // The logit bias that makes the random model speak plain words, asked through kvgate.
  void learn_bias();
};

// The sessions in a store file, and whether every user message of a session carries that
// session's tag (no conversation mixed into another).
struct StoreCheck {
  uint64_t sessions = 0;
  int mixed = 0;
  std::map<std::string, size_t> messages_by_tag;
};
StoreCheck check_store(const std::filesystem::path& db, const std::vector<std::string>& tags);

}  // namespace kvgate::testing
