// Support for the end-to-end tests that run a real llama-server (the pinned mainline build,
// or an ik_llama.cpp build from engines_under_test.h): synthesized models (with the release's
// tokenizer) and one engine start whose log is returned. Engines start as `kvgate bench` starts
// them (bench::LocalEngine).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gguf/synth.h"
#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::testing {

// Writes `spec` with the qwen2 tokenizer into the temp directory; the file is removed by
// the returned guard's destructor.
class TempModel {
 public:
  static Result<TempModel> synthesize(const gguf::SynthSpec& spec, const std::string& label);
  TempModel(TempModel&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempModel& operator=(TempModel&&) = delete;
  ~TempModel();
  const std::filesystem::path& path() const { return path_; }
  // A file beside the model for its chat template (removed with it).
  std::filesystem::path template_path() const { return path_.string() + ".jinja"; }

 private:
  explicit TempModel(std::filesystem::path p) : path_(std::move(p)) {}
  std::filesystem::path path_;
};

struct EngineRun {
  bool ready = false;                // /health answered
  std::vector<std::string> lines;    // everything it printed
  std::string error;                 // why it did not become ready
};

// The build a run uses: the pinned mainline build unless `server` names another; `fork` says
// which fork that build is, for the arguments only that fork has.
struct EngineUnderTest {
  plan::Fork fork = plan::Fork::kMainline;
  std::optional<std::filesystem::path> server;
};

// What every test start passes besides the model: -t 2 --no-warmup, and for mainline -lv 4
// (its allocation lines) and -fit off (no context shrinking); ik prints those lines at any
// verbosity and has no -fit, and gets --log-disable (which only stops its llama.log file in
// the working directory).
std::vector<std::string> common_args(plan::Fork fork);

// The binary `engine` names (resolve_server() for the pinned build).
Result<std::filesystem::path> engine_binary(const EngineUnderTest& engine);

// Starts the engine on `model` with `context` (-c), `slots` (-np), common_args and `args`,
// waits for /health (60 s) and kills it.
EngineRun run_engine(const std::filesystem::path& model, uint64_t context, int slots,
                     const std::vector<std::string>& args, const EngineUnderTest& engine = {});

}  // namespace kvgate::testing
