// kvgate unit systemd|supervisor [MODEL] [kvgate up options] [--name N] [--user U]
//                                 [--jetson-clocks | --clock-lock CMD] [--out FILE]
//
// Writes a service file that runs `kvgate up` with exactly these options at boot
// (engine/service_unit.h). Paths (model, --config, --server, --log-dir) are made absolute;
// XDG_CACHE_HOME is fixed to this user's cache so the service finds the same engine build,
// probe cache and default model. The options are checked as `kvgate up` would check them.
#include <algorithm>
#include <cctype>
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
#include "util/subprocess.h"
#include "util/utf8.h"

namespace kvgate::cli {
namespace {

// A service name that is safe as a file name (no folders), a systemd unit name and inside an
// XML comment ("--" ends one).
bool plain_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || std::isalnum(static_cast<unsigned char>(name[0])) == 0)
    return false;
  if (name.find("--") != std::string_view::npos) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
  });
}

namespace fs = std::filesystem;

std::string absolute(const std::string& p) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? fs::absolute(p).string() : c.string();
}

// UTF-8 text as UTF-16LE bytes with a byte-order mark (Task Scheduler's own export format).
std::string utf16le_with_bom(std::string_view utf8) {
  std::string out = "\xFF\xFE";
  for (char16_t u : util::to_utf16(utf8)) {
    out += static_cast<char>(u & 0xFF);
    out += static_cast<char>(u >> 8);
  }
  return out;
}

}  // namespace

int run_unit(int argc, char** argv) {
  CLI::App app{
      "Write a systemd unit, a supervisord program section or a Windows task that runs `kvgate up` with "
      "these "
      "options.",
      "kvgate unit"};
  std::string kind;
  std::string name = "kvgate";
  std::optional<std::string> user;
  std::optional<std::string> clock_lock;
  std::optional<std::string> out;
  bool jetson_clocks = false;
  UpOptions options;
  app.add_option("kind", kind, "systemd, supervisor or windows-task (Task Scheduler XML, UTF-16)")
      ->required()
      ->check(CLI::IsMember({"systemd", "supervisor", "windows-task"}));
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
  if (!plain_name(name)) {
    return fail(
        fmt::format("--name '{}': use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or "
                    "digit, without '--' (it names a unit, a log file and an XML comment)",
                    name));
  }

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
  auto self = util::this_executable();
  if (!self) return fail(self.error().message(), kExitFailure);
  u.kvgate_binary = *self;
  u.up_args = to_up_args(options);
  u.user = user;
  u.description = fmt::format("kvgate: llama-server supervisor and gateway ({})",
                              merged.values.count("listen") ? merged.values["listen"] : "127.0.0.1:8787");
  // The service finds the same cache; on Windows a task runs as this user, whose
  // %LOCALAPPDATA% is the default, so only a cache named by XDG_CACHE_HOME is passed on.
  if (kind != "windows-task" || std::getenv("XDG_CACHE_HOME") != nullptr) {  // NOLINT(concurrency-mt-unsafe)
    u.environment["XDG_CACHE_HOME"] = engine::cache_root().parent_path().string();
  }
  if (const char* s = std::getenv("KVGATE_SERVER"); s && *s && !merged.values.count("server")) {
    u.environment["KVGATE_SERVER"] = absolute(s);
  }
  if (jetson_clocks) u.clock_lock_command = "/usr/bin/jetson_clocks";
  if (clock_lock) u.clock_lock_command = *clock_lock;
  u.log_file =
      (engine::cache_root() / "logs" / (name + (kind == "windows-task" ? "-task.log" : "-supervisord.log")))
          .string();

  std::string text;
  if (kind == "windows-task") {
    auto task = engine::windows_task(u);
    if (!task) return fail(task.error().message());
    text = utf16le_with_bom(*task);  // what schtasks /xml reads
  } else {
    text = kind == "systemd" ? engine::systemd_unit(u) : engine::supervisor_program(u);
  }
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
