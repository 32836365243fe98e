// kvgate engine build: builds llama-server from a mainline or ik_llama.cpp source tree for
// this device (engine/engine_build.h decides the options) and records the build.
//
//   kvgate engine build ~/src/ik_llama.cpp --dry-run             print the commands and why
//   kvgate engine build ~/src/llama.cpp --out ~/engines/main      configure, build, record
//   kvgate engine build SRC --out DIR --kv-quant q8_0,q4_0         the plan's KV with flash attention
//   kvgate engine build SRC --dry-run --device-root FIXTURE --nvidia-smi-output FILE
//
// A build leaves DIR/bin/llama-server, DIR/BUILD.json (fork, commit, options, device, date,
// `--version`) and DIR/logs/{configure,build}.log.
#include "engine/engine_build.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>
#ifndef _WIN32
#include <sched.h>
#endif

#include "cli/args.h"
#include "cli/command.h"
#include "device/facts.h"
#include "engine/running_instance.h"
#include "util/calendar.h"
#include "util/json.h"
#include "util/subprocess.h"
#include "util/units.h"

namespace kvgate::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string source;
  std::string out;
  std::string build_dir;
  std::string cuda = "auto";
  std::string kv_quant;
  std::string nvcc;
  std::string vcvars;
  std::string device_root;
  std::string nvidia_smi_output;
  std::string target = "llama-server";
  std::optional<unsigned> jobs;
  bool fa_all_quants = false;
  bool native_cpu = false;
  bool stop_running = false;
  bool dry_run = false;
};

void say(const std::string& line) { std::fprintf(stderr, "[engine build] %s\n", line.c_str()); }

struct Captured {
  int code = -1;
  std::string output;
};

// Runs a short command and returns its exit code and output (both streams).
std::optional<Captured> capture(std::vector<std::string> argv, std::chrono::seconds timeout) {
  Captured c;
  std::mutex mu;
  auto p = util::Subprocess::spawn({.argv = std::move(argv), .on_line = [&](std::string_view line) {
                                      std::lock_guard lock(mu);
                                      c.output += std::string(line) + "\n";
                                    }});
  if (!p) return std::nullopt;
  auto st = (*p)->wait_for(timeout);
  (*p)->stop(std::chrono::seconds(1));
  std::lock_guard lock(mu);
  c.code = st && !st->signaled() ? st->code : -1;
  return c;
}

// "0-3,6,8-11" -> 10; 0 when unreadable.
unsigned count_cpu_list(const std::string& text) {
  unsigned n = 0;
  size_t i = 0;
  while (i < text.size()) {
    char* end = nullptr;
    const unsigned long a = std::strtoul(text.c_str() + i, &end, 10);
    if (end == text.c_str() + i) break;
    unsigned long b = a;
    i = static_cast<size_t>(end - text.c_str());
    if (i < text.size() && text[i] == '-') {
      b = std::strtoul(text.c_str() + i + 1, &end, 10);
      i = static_cast<size_t>(end - text.c_str());
    }
    if (b >= a && b - a < 4096) n += static_cast<unsigned>(b - a + 1);
    if (i < text.size() && text[i] == ',')
      ++i;
    else
      break;
  }
  return n;
}

// The device's cores: its sysfs list under --device-root, else the CPUs this process may use.
unsigned device_cores(const std::string& device_root) {
  if (!device_root.empty()) {
    std::ifstream in(fs::path(device_root) / "sys/devices/system/cpu/online");
    std::string line;
    if (std::getline(in, line)) {
      if (unsigned n = count_cpu_list(line); n > 0) return n;
    }
  }
#ifndef _WIN32  // the cores this process may use (a container or taskset may give fewer)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
#endif
  return std::max(1U, std::thread::hardware_concurrency());
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Result<device::Facts> read_device(const Options& o) {
  if (o.device_root.empty() && o.nvidia_smi_output.empty()) return device::read_local_facts();
  std::optional<std::string> smi;
  if (!o.nvidia_smi_output.empty()) {
    smi = read_file(o.nvidia_smi_output);
    if (!smi) return Error(fmt::format("--nvidia-smi-output: cannot read '{}'", o.nvidia_smi_output));
  }
  return device::read_facts(o.device_root.empty() ? fs::path("/") : fs::path(o.device_root), smi);
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read-only
  return v != nullptr ? v : "";
}

// Windows: MSVC already on PATH, else the newest Visual Studio with the x64 C++ tools (--vcvars,
// else vswhere.exe).
void find_msvc(const Options& o, engine::Toolchain& t) {
  t.windows = true;
  t.msvc_on_path = util::find_program("cl").has_value();
  if (!o.vcvars.empty()) {
    t.visual_studio = engine::VisualStudio{.vcvars = o.vcvars};
  } else if (!t.msvc_on_path) {
    std::string program_files = env_or_empty("ProgramFiles(x86)");
    if (program_files.empty()) program_files = "C:\\Program Files (x86)";
    const auto vswhere = engine::vswhere_command(program_files);
    if (util::is_executable_file(vswhere[0])) {
      if (auto r = capture(vswhere, std::chrono::seconds(30)); r && r->code == 0)
        t.visual_studio = engine::parse_vswhere(r->output);
    }
  }
  if (!t.ninja && t.visual_studio && !t.visual_studio->path.empty())
    t.ninja = util::is_executable_file(t.visual_studio->bundled_ninja());
}

engine::Toolchain find_toolchain(const Options& o, const std::string& device_root) {
  engine::Toolchain t;
  t.cores = device_cores(device_root);
  t.ninja = util::find_program("ninja").has_value();
#ifdef _WIN32
  constexpr bool kWindows = true;
#else
  constexpr bool kWindows = false;
#endif
  if (kWindows) find_msvc(o, t);
  if (o.cuda == "off") return t;
  if (auto cmake = util::find_program("cmake")) {
    // "cmake version 3.25.1"
    if (auto v = capture({*cmake, "--version"}, std::chrono::seconds(20));
        v && v->output.starts_with("cmake version ")) {
      t.cmake_version = v->output.substr(14, v->output.find_first_of(" \n", 14) - 14);
    }
  }
  if (!o.nvcc.empty()) {
    t.nvcc = o.nvcc;
  } else if (const char* cudacxx = std::getenv("CUDACXX");
             cudacxx != nullptr && util::is_executable_file(cudacxx)) {  // NOLINT
    t.nvcc = cudacxx;
  } else if (auto on_path = util::find_program("nvcc")) {
    t.nvcc = *on_path;
  } else if (util::is_executable_file("/usr/local/cuda/bin/nvcc")) {
    t.nvcc = "/usr/local/cuda/bin/nvcc";
  } else if (const std::string cuda = env_or_empty("CUDA_PATH");
             t.windows && !cuda.empty() && util::is_executable_file(cuda + "\\bin\\nvcc.exe")) {
    t.nvcc = cuda + "\\bin\\nvcc.exe";  // the Windows installer sets CUDA_PATH
  }
  if (t.nvcc && util::is_executable_file(*t.nvcc)) {
    if (auto v = capture({*t.nvcc, "--version"}, std::chrono::seconds(20)); v && v->code == 0) {
      // "Cuda compilation tools, release 12.6, V12.6.68"
      const size_t at = v->output.find("release ");
      if (at != std::string::npos) {
        const size_t end = v->output.find_first_of(", \n", at + 8);
        t.cuda_version = v->output.substr(at + 8, end - at - 8);
      }
    }
  }
  return t;
}

std::string git_commit(const fs::path& source) {
  std::error_code ec;
  if (!fs::exists(source / ".git", ec)) return "";
  auto git = util::find_program("git");
  if (!git) return "";
  auto r = capture({*git, "-C", source.string(), "rev-parse", "HEAD"}, std::chrono::seconds(20));
  if (!r || r->code != 0) return "";
  std::string out = r->output;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

Result<engine::BuildRequest> build_request(const Options& o, plan::Fork fork) {
  engine::BuildRequest r;
  if (o.cuda == "on")
    r.cuda = engine::CudaChoice::kOn;
  else if (o.cuda == "off")
    r.cuda = engine::CudaChoice::kOff;
  else if (o.cuda != "auto")
    return Error(fmt::format("--cuda '{}': give auto, on or off", o.cuda));
  if (!o.kv_quant.empty()) {
    auto kv = engine::parse_kv_pair(o.kv_quant, fork);
    if (!kv) return std::move(kv).error();
    r.fa_kv = *kv;
  }
  r.fa_all_quants = o.fa_all_quants;
  r.native_cpu = o.native_cpu;
  r.jobs = o.jobs;
  if (o.jobs && *o.jobs == 0) return Error("--jobs must be at least 1");
  r.build_dir = o.build_dir.empty() ? fs::path() : fs::absolute(o.build_dir);
  r.target = o.target;
  return r;
}

std::string device_line(const device::Facts& d, unsigned cores) {
  return fmt::format("{}; {} core(s)", d.summary(), cores);
}

// The command line as the shell that runs it reads it: POSIX sh, or cmd.exe on Windows.
std::string command_line(const std::vector<std::string>& argv, bool windows) {
  return windows ? util::windows_command(argv) : util::shell_command(argv);
}

void print_plan(std::FILE* out, const engine::SourceTree& tree, const device::Facts& device,
                const engine::Toolchain& tools, const engine::BuildPlan& plan) {
  std::fprintf(out, "# kvgate engine build: %s\n", tree.dir.string().c_str());
  std::fprintf(out, "# device: %s\n", device_line(device, tools.cores).c_str());
  for (const auto& r : plan.reasons) std::fprintf(out, "# %s\n", r.c_str());
  for (const auto& w : plan.warnings) std::fprintf(out, "# warning: %s\n", w.c_str());
  if (!plan.vcvars.empty()) std::fprintf(out, "call %s\n", util::windows_quote(plan.vcvars).c_str());
  std::fprintf(out, "%s\n%s\n", command_line(plan.configure, plan.windows).c_str(),
               command_line(plan.build, plan.windows).c_str());
}

// Runs one step with its output in `log`; ninja's progress is echoed every 30 s.
Status run_step(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                const fs::path& log, std::string_view what) {
  std::ofstream file(log, std::ios::trunc);
  if (!file) return Error(fmt::format("cannot write '{}'", log.string()));
  std::mutex mu;
  auto last = std::chrono::steady_clock::now();
  auto p = util::Subprocess::spawn({.argv = argv, .set_env = env, .on_line = [&](std::string_view line) {
                                      std::lock_guard lock(mu);
                                      file << line << '\n';
                                      const auto now = std::chrono::steady_clock::now();
                                      if (line.starts_with("[") && now - last > std::chrono::seconds(30)) {
                                        last = now;
                                        say(fmt::format("{}: {}", what, line.substr(0, line.find(']') + 1)));
                                      }
                                    }});
  if (!p) return std::move(p).error().with_context(what);
  std::optional<util::ExitStatus> st;
  while (!(st = (*p)->wait_for(std::chrono::seconds(1)))) {
  }
  (*p)->stop(std::chrono::seconds(1));
  {
    std::lock_guard lock(mu);
    file.flush();
  }
  if (st->code == 0 && !st->signaled()) return {};
  std::string tail;
  if (auto text = read_file(log.string())) {
    size_t pos = text->size();
    for (int lines = 0; lines < 40 && pos > 0; ++lines) pos = text->rfind('\n', pos - 1);
    tail = text->substr(pos == std::string::npos ? 0 : pos);
  }
  return Error(fmt::format("{} failed ({}); the end of {}:\n{}", what, st->describe(), log.string(), tail));
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  const std::tm tm = util::utc_calendar(t);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Status write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc | std::ios::binary);
    if (!(f << text)) return Error(fmt::format("cannot write '{}'", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return Error(fmt::format("cannot rename '{}' to '{}': {}", tmp.string(), path.string(), ec.message()));
  return {};
}

// Windows: the environment vcvars64.bat leaves: cmd.exe calls it, then lists `set`. Empty when
// the plan needs none. (cmd.exe writes the listing in the console's code page: a folder name
// outside it would not survive; Visual Studio's own folders are ASCII.)
Result<std::map<std::string, std::string>> compiler_environment(const engine::BuildPlan& plan) {
  if (plan.vcvars.empty()) return std::map<std::string, std::string>{};
  auto cmd = util::find_program("cmd");
  if (!cmd) return Error("cmd.exe is not on PATH");
  say("reading the compiler environment of " + plan.vcvars);
  auto r = capture({*cmd, "/d", "/c", "call", plan.vcvars, ">nul", "&&", "set"}, std::chrono::seconds(120));
  if (!r || r->code != 0) {
    return Error(fmt::format("'{}' failed{}: is it Visual Studio's vcvars64.bat? (--vcvars PATH)",
                             plan.vcvars, r ? fmt::format(" (exit {})", r->code) : ""));
  }
  auto env = engine::parse_environment(r->output);
  if (!engine::environment_value(env, "INCLUDE")) {
    return Error(
        fmt::format("'{}' set no INCLUDE: it is not a Visual Studio environment script", plan.vcvars));
  }
  return env;
}

// Copies `files` into `dir` (through a temporary name each, so a half-copied file never stays).
Status copy_into(const std::vector<fs::path>& files, const fs::path& dir) {
  for (const fs::path& from : files) {
    std::error_code ec;
    const fs::path to = dir / from.filename();
    const fs::path tmp = to.string() + ".tmp";
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, to, ec);
    if (ec) return Error(fmt::format("copying '{}' to '{}': {}", from.string(), to.string(), ec.message()));
  }
  return {};
}

// Configure, build, copy the binary (and on Windows the CUDA runtime DLLs beside `nvcc`) into
// out/bin, record the build. Returns the binary.
Result<fs::path> build_and_record(const engine::SourceTree& tree, const device::Facts& device,
                                  const engine::BuildPlan& plan, const std::optional<std::string>& nvcc,
                                  const fs::path& out) {
  std::error_code ec;
  fs::create_directories(out / "bin", ec);
  fs::create_directories(out / "logs", ec);
  if (ec) return Error(fmt::format("cannot create '{}': {}", out.string(), ec.message()));
  KV_ASSIGN_OR_RETURN(const auto env, compiler_environment(plan));
  const auto env_path = engine::environment_value(env, "PATH");
  auto cmake = env_path ? util::find_program("cmake", *env_path) : util::find_program("cmake");
  if (!cmake) {
    return Error(plan.windows
                     ? "cmake.exe is not on PATH nor in Visual Studio's environment: install CMake or "
                       "Visual Studio's \"C++ CMake tools for Windows\""
                     : "cmake is not on PATH (apt install cmake)");
  }
  std::vector<std::string> configure = plan.configure, build = plan.build;
  configure[0] = build[0] = *cmake;

  const auto start = std::chrono::steady_clock::now();
  say("configuring (log: " + (out / "logs/configure.log").string() + ")");
  KV_TRY(run_step(configure, env, out / "logs/configure.log", "configure"));
  say(fmt::format("building {} with -j{} (log: {}){}", plan.binary.filename().string(), plan.jobs.jobs,
                  (out / "logs/build.log").string(), plan.cuda ? "; nvcc builds take 30-60 minutes" : ""));
  KV_TRY(run_step(build, env, out / "logs/build.log", "build"));
  const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 60;

  const fs::path binary = out / "bin" / plan.binary.filename();
  std::vector<fs::path> files{plan.binary};
  if (plan.windows && plan.cuda && nvcc) {
    const auto dlls = engine::cuda_runtime_dlls(*nvcc);
    if (dlls.empty())
      say("warning: no CUDA runtime DLLs beside " + *nvcc + ": the toolkit's bin must be on PATH");
    files.insert(files.end(), dlls.begin(), dlls.end());
  }
  KV_TRY(copy_into(files, out / "bin"));

  std::string version;
  if (auto v = capture({binary.string(), "--version"}, std::chrono::seconds(30))) version = v->output;
  auto record = engine::build_record(tree, device, plan, version, utc_now());
  record["build_minutes"] = minutes;
  KV_TRY(write_atomically(out / "BUILD.json", util::json_text(record, 2) + "\n"));
  say(fmt::format("built {} in {:.1f} min; record: {}", binary.string(), minutes,
                  (out / "BUILD.json").string()));
  return binary;
}

// --stop-running: stops the instances that hold the memory, then the caller plans again.
Status stop_instances(std::span<const engine::RunningInstance> running, bool plan_windows) {
  for (const auto& r : running) {
    say(fmt::format("stopping {} ({})", r.description, plan_windows ? "its stop event" : "SIGTERM"));
    KV_TRY(engine::stop_instance(r, std::chrono::seconds(60)));
  }
  return {};
}

int build(const Options& o) {
  auto fail = [](const std::string& msg, int code = kExitFailure) {
    std::fprintf(stderr, "kvgate engine build: %s\n", msg.c_str());
    return code;
  };
  if (!o.dry_run && o.out.empty()) return fail("--out DIR is required (or --dry-run)", kExitUsage);
  auto tree = engine::read_source_tree(fs::absolute(o.source).lexically_normal());
  if (!tree) return fail(tree.error().message());
  tree->commit = git_commit(tree->dir);
  auto request = build_request(o, tree->fork);
  if (!request) return fail(request.error().message(), kExitUsage);
  auto device = read_device(o);
  if (!device) return fail(device.error().message(), kExitUsage);
  const engine::Toolchain tools = find_toolchain(o, o.device_root);
  auto running = engine::find_running_instances();
  auto plan = engine::plan_build(*tree, *device, tools, *request, running);
  if (!plan) return fail(plan.error().message());

  const bool stop = o.stop_running && plan->jobs.memory_short && !running.empty();
  if (o.dry_run) {
    print_plan(stdout, *tree, *device, tools, *plan);
    if (stop) {
      for (const auto& r : running)
        std::printf("# --stop-running would first stop: %s%d\n",
                    plan->windows ? "kvgate up, pid " : "kill -TERM ", static_cast<int>(r.pid));
    }
    return kExitOk;
  }
  if (plan->cuda && !tools.nvcc) return fail("nvcc not found: install the CUDA toolkit or pass --nvcc PATH");
  if (stop) {
    if (auto st = stop_instances(running, plan->windows); !st) return fail(st.error().message());
    device = read_device(o);
    if (!device) return fail(device.error().message());
    plan = engine::plan_build(*tree, *device, tools, *request, engine::find_running_instances());
    if (!plan) return fail(plan.error().message());
  }
  print_plan(stderr, *tree, *device, tools, *plan);
  auto binary = build_and_record(*tree, *device, *plan, tools.nvcc, fs::absolute(o.out));
  if (!binary) return fail(binary.error().message());
  std::printf("%s\n", binary->string().c_str());
  return kExitOk;
}

}  // namespace

int run_engine(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) != "build") {
    const bool help =
        argc >= 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h");
    std::fprintf(help ? stdout : stderr,
                 "usage: kvgate engine build SRC [options]   (kvgate engine build --help for its options)\n");
    return help ? kExitOk : kExitUsage;
  }
  CLI::App app{
      "Build llama-server from a mainline llama.cpp or ik_llama.cpp source tree with the options this "
      "device needs (CUDA architecture, flash-attention kernels, CPU flags, -j from free memory) and "
      "record the build in OUT/BUILD.json.",
      "kvgate engine build"};
  Options o;
  app.add_option("SRC", o.source, "the source tree (mainline or ik_llama.cpp; the fork is detected)")
      ->required();
  app.add_option("--out", o.out, "where bin/llama-server, BUILD.json and logs/ go");
  app.add_option("--build-dir", o.build_dir, "CMake build folder (default SRC/build-kvgate)");
  app.add_option("--cuda", o.cuda, "auto (a GPU on the device: on), on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--kv-quant", o.kv_quant,
                 "the plan's K[,V] cache types with flash attention (q8_0, q8_0,q4_0): compiles their CUDA "
                 "FA kernels when the fork does not by default");
  app.add_flag("--fa-all-quants", o.fa_all_quants, "compile the CUDA FA kernels of every K/V pair");
  app.add_flag("--native-cpu", o.native_cpu, "x86-64: -march=native (enables AMX where present)");
  app.add_option("--jobs,-j", o.jobs, "parallel compile jobs (default: from free memory and cores)");
  app.add_option("--target", o.target, "the CMake target (default llama-server)");
  app.add_option("--nvcc", o.nvcc,
                 "the CUDA compiler (default: $CUDACXX, PATH, /usr/local/cuda/bin/nvcc; Windows: "
                 "%CUDA_PATH%\\bin\\nvcc.exe)");
  app.add_option("--vcvars", o.vcvars,
                 "Windows: Visual Studio's vcvars64.bat, whose environment the build runs in (default: the "
                 "newest Visual Studio with the x64 C++ tools, from vswhere.exe)");
  app.add_flag(
      "--stop-running", o.stop_running,
      "when memory is short, stop the running kvgate up instances first (SIGTERM; Windows: their stop "
      "event)");
  app.add_flag("--dry-run", o.dry_run, "print the commands and the reasons; run nothing");
  app.add_option("--device-root", o.device_root, "read the device from this tree instead of / (fixtures)");
  app.add_option("--nvidia-smi-output", o.nvidia_smi_output, "use this file as nvidia-smi's output");
  if (auto code = parse_args(app, argc - 1, argv + 1)) return *code;
  return build(o);
}

}  // namespace kvgate::cli
