#include "engine/supervisor_deps.h"

#include <fmt/format.h>

#include "engine/server_process.h"

namespace kvgate::engine {

std::string EngineEndpoint::base_url() const { return fmt::format("http://{}:{}", host, port); }

namespace {

class ServerProcessEngine final : public RunningEngine {
 public:
  ServerProcessEngine(std::unique_ptr<ServerProcess> p, std::string api_key)
      : process_(std::move(p)), api_key_(std::move(api_key)) {}
  pid_t pid() const override { return process_->pid(); }
  EngineEndpoint endpoint() const override { return {process_->host(), process_->port(), api_key_}; }
  bool running() override { return process_->running(); }
  std::optional<util::ExitStatus> exit_status() override { return process_->exit_status(); }
  util::ExitStatus stop(Millis grace) override { return process_->stop(grace); }
  std::string log_tail(size_t lines) const override { return process_->log_tail(lines); }

 private:
  std::unique_ptr<ServerProcess> process_;
  std::string api_key_;
};

}  // namespace

Result<std::unique_ptr<RunningEngine>> ServerProcessLauncher::launch(
    const LaunchSpec& spec, std::function<void(std::string_view)> on_line) {
  KV_ASSIGN_OR_RETURN(auto process, ServerProcess::start({.binary = spec.binary,
                                                          .args = spec.args,
                                                          .host = spec.host,
                                                          .port = spec.port,
                                                          .ring_lines = spec.ring_lines,
                                                          .env = spec.env,
                                                          .on_line = std::move(on_line)}));
  return std::unique_ptr<RunningEngine>(new ServerProcessEngine(std::move(process), spec.api_key));
}

}  // namespace kvgate::engine
