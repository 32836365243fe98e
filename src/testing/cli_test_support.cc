#include "testing/cli_test_support.h"

#include <chrono>
#include <mutex>
#include <string_view>

#include "testing/paths.h"
#include "util/subprocess.h"

namespace kvgate::testing {

std::vector<std::string> kvgate_command() {
  std::vector<std::string> argv;
  if (std::string_view(kvgate::testing::test_emulator()) != "") argv.emplace_back(kvgate::testing::test_emulator());
  argv.push_back(std::string(kvgate::testing::kvgate_path()));
  return argv;
}

Ran run_command(std::vector<std::string> argv, const std::map<std::string, std::string>& set_env) {
  std::mutex mu;
  Ran r;
  auto p = util::Subprocess::spawn({.argv = std::move(argv), .set_env = set_env, .on_line = [&](std::string_view line) {
                                      std::lock_guard lock(mu);
                                      r.output += std::string(line) + "\n";
                                    }});
  if (!p) {
    r.output = p.error().message();
    return r;
  }
  (*p)->wait_for(std::chrono::seconds(60));
  const util::ExitStatus st = (*p)->stop(std::chrono::seconds(1));
  std::lock_guard lock(mu);
  r.code = st.signaled() ? -st.signal : st.code;
  return r;
}

Ran run_kvgate(const std::vector<std::string>& args, const std::map<std::string, std::string>& set_env) {
  std::vector<std::string> argv = kvgate_command();
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(std::move(argv), set_env);
}

}  // namespace kvgate::testing
