// Support for the end-to-end tests that run the pinned llama-server: synthesized models
// (with the release's tokenizer) and one engine start whose log is returned.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "gguf/synth.h"
#include "util/result.h"

namespace kvgate::engine::e2e {

// Writes `spec` with the qwen2 tokenizer into the temp directory; the file is removed by
// the returned guard's destructor.
class TempModel {
 public:
  static Result<TempModel> synthesize(const gguf::SynthSpec& spec, const std::string& label);
  TempModel(TempModel&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempModel& operator=(TempModel&&) = delete;
  ~TempModel();
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TempModel(std::filesystem::path p) : path_(std::move(p)) {}
  std::filesystem::path path_;
};

struct EngineRun {
  bool ready = false;                // /health answered
  std::vector<std::string> lines;    // everything it printed
  std::string error;                 // why it did not become ready
};

// Starts the pinned server on `model` with `args` plus -lv 4 -t 2 --no-warmup -fit off,
// waits for /health (60 s) and stops it.
EngineRun run_engine(const std::filesystem::path& model, const std::vector<std::string>& args);

}  // namespace kvgate::engine::e2e
