// kvgate unit systemd|supervisor [MODEL] [kvgate up options] [--name N] [--user U]
//                                 [--jetson-clocks | --clock-lock CMD] [--out FILE]
//
// Writes a service file that runs `kvgate up` with exactly these options at boot
// (engine/service_unit.h). Paths (model, --config, --server, --log-dir) are made absolute;
// XDG_CACHE_HOME is fixed to this user's cache so the service finds the same engine build,
// probe cache and default model. The options are checked as `kvgate up` would check them.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/up_options.h"
#include "engine/pinned.h"
#include "engine/service_unit.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;

std::string absolute(const std::string& p) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? fs::absolute(p).string() : c.string();
}

}  // namespace

int run_unit(int argc, char** argv) {
  CLI::App app{
      "Write a systemd unit or a supervisord program section that runs `kvgate up` with these options.",
      "kvgate unit"};
  std::string kind;
  std::string name = "kvgate";
  std::optional<std::string> user;
  std::optional<std::string> clock_lock;
  std::optional<std::string> out;
  bool jetson_clocks = false;
  UpOptions options;
  app.add_option("kind", kind, "systemd or supervisor")
      ->required()
      ->check(CLI::IsMember({"systemd", "supervisor"}));
  add_up_options(app, options);
  app.add_option("--name", name, "unit / program name (default kvgate)");
  app.add_option("--user", user, "run the service as this user");
  app.add_flag("--jetson-clocks", jetson_clocks,
               "lock CPU/GPU clocks first with /usr/bin/jetson_clocks (Jetson)");
  app.add_option("--clock-lock", clock_lock,
                 "a command to run before kvgate up (clock locking), e.g. nvidia-smi -lgc ...");
  app.add_option("--out", out, "write here instead of stdout");
  if (auto code = parse_args(app, argc, argv)) return *code;
  auto fail = [](const std::string& msg, int code = kExitUsage) {
    std::fprintf(stderr, "kvgate unit: %s\n", msg.c_str());
    return code;
  };
  if (name.empty() || name.find_first_of("/ \t\n") != std::string::npos)
    return fail("--name must be a plain word");

  // Check everything `kvgate up` will check, the config file's content included.
  UpOptions merged = options;
  if (options.config) {
    if (auto st = merge_config_file(*options.config, merged); !st) return fail(st.error().message());
  }
  if (auto r = resolve_up_options(merged); !r) return fail(r.error().message());

  if (options.model) options.model = absolute(*options.model);
  if (options.config) options.config = absolute(*options.config);
  for (const char* key : {"server", "log-dir"}) {
    if (auto it = options.values.find(key); it != options.values.end()) it->second = absolute(it->second);
  }

  engine::ServiceUnitOptions u;
  u.name = name;
  std::error_code ec;
  u.kvgate_binary = fs::canonical("/proc/self/exe", ec).string();
  if (ec) return fail("cannot find the kvgate binary: " + ec.message(), kExitFailure);
  u.up_args = to_up_args(options);
  u.user = user;
  u.description = fmt::format("kvgate: llama-server supervisor and gateway ({})",
                              merged.values.count("listen") ? merged.values["listen"] : "127.0.0.1:8787");
  u.environment["XDG_CACHE_HOME"] = engine::cache_root().parent_path().string();
  if (const char* s = std::getenv("KVGATE_SERVER"); s && *s && !merged.values.count("server")) {
    u.environment["KVGATE_SERVER"] = absolute(s);
  }
  if (jetson_clocks) u.clock_lock_command = "/usr/bin/jetson_clocks";
  if (clock_lock) u.clock_lock_command = *clock_lock;
  u.log_file = (engine::cache_root() / "logs" / (name + "-supervisord.log")).string();

  const std::string text = kind == "systemd" ? engine::systemd_unit(u) : engine::supervisor_program(u);
  if (!out) {
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  std::ofstream f(*out, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) return fail(fmt::format("cannot write '{}'", *out), kExitFailure);
  std::fprintf(stderr, "kvgate unit: wrote %s\n", out->c_str());
  return kExitOk;
}

}  // namespace kvgate::cli
