#include "testing/engine_e2e.h"

#include <unistd.h>

#include <atomic>
#include <chrono>

#include <fmt/format.h>

#include "bench/local_engine.h"
#include "engine/pinned.h"
#include "gguf/file.h"

namespace kvgate::testing {

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
  std::filesystem::remove(template_path(), ec);
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

EngineRun run_engine(const std::filesystem::path& model, uint64_t context, int slots,
                     const std::vector<std::string>& args, const EngineUnderTest& engine) {
  EngineRun run;
  std::vector<std::string> extra = common_args(engine.fork);
  extra.insert(extra.end(), args.begin(), args.end());
  std::optional<std::string> server;  // the pinned build (or $KVGATE_SERVER)
  if (engine.server) server = engine.server->string();
  auto local = bench::LocalEngine::start({.model = model,
                                          .server = server,
                                          .context = context,
                                          .slots = slots,
                                          .extra_args = extra,
                                          .ready_timeout = std::chrono::seconds(60)});
  if (!local) {
    run.error = local.error().message();
    return run;
  }
  run.ready = true;
  // The startup log is complete once /health answers; a graceful shutdown would only add
  // the server's one-second polling interval to every run.
  (*local)->kill();
  run.lines = (*local)->log_lines();
  return run;
}

}  // namespace kvgate::testing
