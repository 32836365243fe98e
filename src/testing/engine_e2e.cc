#include "testing/engine_e2e.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <fmt/format.h>

#include "engine/pinned.h"
#include "engine/server_process.h"
#include "gguf/file.h"

namespace kvgate::testing {

using engine::ServerProcess;
using engine::resolve_server;
using engine::vocab_file;

Result<TempModel> TempModel::synthesize(const gguf::SynthSpec& spec, const std::string& label) {
  static std::atomic<int> counter{0};
  KV_ASSIGN_OR_RETURN(auto vocab_path, vocab_file("qwen2"));
  KV_ASSIGN_OR_RETURN(auto vocab, gguf::File::open(vocab_path));
  auto path = std::filesystem::temp_directory_path() /
              fmt::format("kvgate_e2e_{}_{}_{}.gguf", label, ::getpid(), counter.fetch_add(1));
  KV_TRY(gguf::synthesize(spec, &vocab, path));
  return TempModel(path);
}

TempModel::~TempModel() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

std::vector<std::string> common_args(plan::Fork fork) {
  std::vector<std::string> args = {"-t", "2", "--no-warmup"};
  if (fork == plan::Fork::kMainline) args.insert(args.end(), {"-lv", "4", "-fit", "off"});
  if (fork == plan::Fork::kIk) args.push_back("--log-disable");  // else it writes llama.log into the cwd
  return args;
}

Result<std::filesystem::path> engine_binary(const EngineUnderTest& engine) {
  if (engine.server) return *engine.server;
  return resolve_server();
}

EngineRun run_engine(const std::filesystem::path& model, const std::vector<std::string>& args,
                     const EngineUnderTest& engine) {
  EngineRun run;
  auto binary = engine_binary(engine);
  if (!binary) {
    run.error = binary.error().message();
    return run;
  }
  std::vector<std::string> argv = {"-m", model.string()};
  const auto common = common_args(engine.fork);
  argv.insert(argv.end(), common.begin(), common.end());
  argv.insert(argv.end(), args.begin(), args.end());
  auto server = ServerProcess::start({.binary = *binary, .args = argv});
  if (!server) {
    run.error = server.error().message();
    return run;
  }
  auto ready = (*server)->wait_ready(std::chrono::seconds(60));
  run.ready = ready.ok();
  if (!ready.ok()) run.error = ready.error().message();
  // The startup log is complete once /health answers; a graceful shutdown would only add
  // the server's one-second polling interval to every run.
  (*server)->signal(SIGKILL);
  (*server)->stop(std::chrono::seconds(5));
  run.lines = (*server)->log_lines();
  return run;
}

}  // namespace kvgate::testing
