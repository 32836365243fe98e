#include "engine/service_unit.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "util/subprocess.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

// Runs a command, returns (exit code, combined output).
std::pair<int, std::string> run(std::vector<std::string> argv) {
  std::mutex mu;
  std::string out;
  auto p = util::Subprocess::spawn({.argv = std::move(argv), .on_line = [&](std::string_view l) {
                                      std::lock_guard lock(mu);
                                      out += std::string(l) + "\n";
                                    }});
  if (!p) return {-1, p.error().message()};
  (*p)->wait_for(std::chrono::seconds(30));
  const auto st = (*p)->stop();
  std::lock_guard lock(mu);
  return {st.signaled() ? -st.signal : st.code, out};
}

ServiceUnitOptions sample() {
  ServiceUnitOptions o;
  o.name = "kvgate-test";
  o.kvgate_binary = "/opt/kv gate/bin/kvgate";
  o.up_args = {"/models/it's a model.gguf", "--listen", "127.0.0.1:8787", "--api-key", "a$b%c\"d"};
  o.environment = {{"XDG_CACHE_HOME", "/var/cache/kv gate"}};
  o.user = "llm";
  o.log_file = "/var/log/kvgate.log";
  return o;
}

TEST(ServiceUnitTest, SystemdUnitHasThePolicy) {
  const std::string u = systemd_unit(sample());
  for (auto line :
       {"Type=simple", "User=llm", "Restart=on-failure", "RestartSec=5", "KillMode=control-group",
        "KillSignal=SIGTERM", "TimeoutStopSec=30", "StartLimitBurst=5", "StartLimitIntervalSec=300",
        "WantedBy=multi-user.target", "Environment=\"XDG_CACHE_HOME=/var/cache/kv gate\""}) {
    EXPECT_NE(u.find(std::string("\n") + line + "\n"), std::string::npos) << line << "\n" << u;
  }
  EXPECT_NE(
      u.find("ExecStart=\"/opt/kv gate/bin/kvgate\" up \"/models/it's a model.gguf\" --listen 127.0.0.1:8787 "
             "--api-key \"a$$b%%c\\\"d\"\n"),
      std::string::npos)
      << u;
  EXPECT_EQ(u.find("ExecStartPre"), std::string::npos);  // clock locking is opt-in
  auto o = sample();
  o.clock_lock_command = "/usr/bin/jetson_clocks";
  EXPECT_NE(systemd_unit(o).find("\nExecStartPre=-/usr/bin/jetson_clocks\n"), std::string::npos);
}

TEST(ServiceUnitTest, Quoting) {
  EXPECT_EQ(systemd_quote("/usr/bin/kvgate"), "/usr/bin/kvgate");
  EXPECT_EQ(systemd_quote("a b"), "\"a b\"");
  EXPECT_EQ(systemd_quote("100%"), "\"100%%\"");
  EXPECT_EQ(systemd_quote(""), "\"\"");
  EXPECT_EQ(shell_quote("--ctx"), "--ctx");
  EXPECT_EQ(shell_quote("it's"), "'it'\"'\"'s'");
}

// supervisord splits `command=` like Python's shlex after expanding %(..)s: check the
// generated section with Python itself.
TEST(ServiceUnitTest, SupervisorProgramSplitsBackIntoTheSameArguments) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "python3 not installed";
  for (bool clock : {false, true}) {
    auto o = sample();
    if (clock) o.clock_lock_command = "/usr/bin/jetson_clocks --fan";
    const std::string text = supervisor_program(o);
    const fs::path file = fs::temp_directory_path() / fmt::format("kvgate_supervisor_{}.conf", ::getpid());
    std::ofstream(file) << text;
    const std::string script = R"(
import configparser, json, shlex, sys
cp = configparser.RawConfigParser()
cp.read(sys.argv[1])
sec = cp['program:kvgate-test']
cmd = sec['command'] % {}
print(json.dumps(shlex.split(cmd)))
for key in ['stopasgroup', 'killasgroup', 'autorestart', 'stopsignal', 'stdout_logfile_maxbytes', 'user', 'environment']:
    print(key + '=' + sec[key])
)";
    auto [code, out] = run({"/usr/bin/python3", "-c", script, file.string()});
    fs::remove(file);
    ASSERT_EQ(code, 0) << out << "\n" << text;
    std::string expected_argv =
        R"(["/opt/kv gate/bin/kvgate", "up", "/models/it's a model.gguf", "--listen", "127.0.0.1:8787", "--api-key", "a$b%c\"d"])";
    if (clock) {
      expected_argv =
          R"(["/bin/sh", "-c", "/usr/bin/jetson_clocks --fan || true; exec '/opt/kv gate/bin/kvgate' up '/models/it'\"'\"'s a model.gguf' --listen 127.0.0.1:8787 --api-key 'a$b%c\"d'"])";
    }
    EXPECT_EQ(out.substr(0, out.find('\n')), expected_argv) << text;
    for (auto kv : {"stopasgroup=true", "killasgroup=true", "autorestart=unexpected", "stopsignal=TERM",
                    "stdout_logfile_maxbytes=20971520", "user=llm",
                    "environment=XDG_CACHE_HOME=\"/var/cache/kv gate\""}) {
      EXPECT_NE(out.find(std::string(kv) + "\n"), std::string::npos) << kv << "\n" << out;
    }
  }
}

}  // namespace
}  // namespace kvgate::engine
