#include "engine/engine_build.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "plan/kv_type.h"
#include "util/units.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

std::string on_off(bool on) { return on ? "ON" : "OFF"; }

// `-DNAME=VALUE` when the tree declares NAME (or always for CMake's own variables).
struct CmakeArgs {
  const SourceTree& tree;
  std::vector<std::string> args;

  void set(std::string_view name, std::string_view value) {
    if (name.starts_with("CMAKE_") || tree.declares(name))
      args.push_back(fmt::format("-D{}={}", name, value));
  }
  void flag(std::string_view name, bool on) { set(name, on_off(on)); }
};

// --- CUDA -------------------------------------------------------------------------------

struct ArchNeed {
  int arch;
  int cuda;  // first CUDA release that targets it, major * 100 + minor
};

// nvcc's -arch support by release (CUDA release notes): Orin 8.7 since 11.4, Ada/Hopper since
// 11.8, Blackwell 10.0/10.1/12.0 since 12.8, 10.3/12.1 since 12.9, Thor 11.0 (10.1 before the
// renaming) since 13.0.
constexpr ArchNeed kArchNeeds[] = {{87, 1104},  {89, 1108},  {90, 1108},  {100, 1208}, {101, 1208},
                                   {103, 1209}, {110, 1300}, {120, 1208}, {121, 1209}};

// "12.6" -> 1206; nullopt when it does not start with MAJOR.MINOR.
std::optional<int> parse_cuda_version(const std::string& v) {
  int major = 0, minor = 0;
  if (std::sscanf(v.c_str(), "%d.%d", &major, &minor) != 2 || major < 0 || minor < 0 || minor > 99)
    return std::nullopt;
  return major * 100 + minor;
}

Status check_cuda_version(const std::string& arch_list, const std::optional<std::string>& cuda_version) {
  if (!cuda_version) return {};
  const auto have = parse_cuda_version(*cuda_version);
  if (!have) return {};
  size_t start = 0;
  while (start <= arch_list.size()) {
    const size_t end = std::min(arch_list.find(';', start), arch_list.size());
    const int arch = std::atoi(arch_list.substr(start, end - start).c_str());
    for (const auto& need : kArchNeeds) {
      if (need.arch == arch && *have < need.cuda) {
        return Error(
            fmt::format("CUDA architecture {} needs CUDA {}.{} or newer, but nvcc is {}{}", arch,
                        need.cuda / 100, need.cuda % 100, *cuda_version,
                        arch == 110 ? " (Thor needs JetPack 7's CUDA 13; CUDA 12.x called it sm_101)" : ""));
      }
    }
    if (*have >= 1300 && arch > 0 && arch < 75) {
      return Error(
          fmt::format("CUDA {} no longer targets architecture {} (CUDA 13 dropped everything below 7.5): "
                      "build with the CUDA 12 or 11 toolkit of the device's JetPack",
                      *cuda_version, arch));
    }
    start = end + 1;
  }
  return {};
}

std::string describe_device(const device::Facts& d) {
  if (d.jetson) {
    std::string s = d.jetson->model.empty() ? "a Jetson" : d.jetson->model;
    if (!d.jetson->soc.empty()) s += fmt::format(" ({}", d.jetson->soc);
    if (!d.jetson->jetpack.empty())
      s += fmt::format("{}JetPack {}", d.jetson->soc.empty() ? " (" : ", ", d.jetson->jetpack);
    if (!d.jetson->soc.empty() || !d.jetson->jetpack.empty()) s += ")";
    return s;
  }
  if (!d.gpus.empty()) {
    std::string s = d.gpus[0].name;
    if (!d.gpus[0].compute_capability.empty())
      s += fmt::format(" (compute {})", d.gpus[0].compute_capability);
    if (d.gpus.size() > 1) s += fmt::format(" and {} more GPU(s)", d.gpus.size() - 1);
    return s;
  }
  return "no NVIDIA GPU";
}

// "3.25.1" < {3, 25, 2}; an unreadable version is not older.
bool older_than(const std::string& version, std::array<int, 3> than) {
  std::array<int, 3> v{0, 0, 0};
  if (std::sscanf(version.c_str(), "%d.%d.%d", &v[0], &v[1], &v[2]) < 2) return false;
  return v < than;
}

struct CudaDecision {
  bool on = false;
  std::string arch;
};

Result<CudaDecision> decide_cuda(const SourceTree& tree, const device::Facts& device, const Toolchain& tools,
                                 const BuildRequest& request, BuildPlan& plan) {
  const std::string arch = device.cuda_arch();
  if (request.cuda == CudaChoice::kOff) {
    plan.reasons.push_back(fmt::format("cuda: off (--cuda off; the device has {})", describe_device(device)));
    return CudaDecision{};
  }
  if (arch.empty()) {
    if (request.cuda == CudaChoice::kOn) {
      return Error(
          "--cuda on: the device has no NVIDIA GPU (no Jetson found, nvidia-smi lists none); "
          "use --cuda auto or off for a CPU build");
    }
    plan.reasons.push_back("cuda: off (no Jetson found and nvidia-smi lists no GPU): a CPU build");
    return CudaDecision{};
  }
  if (!tree.declares("GGML_CUDA")) {
    return Error(
        fmt::format("'{}' declares no GGML_CUDA option: this tree cannot build the CUDA backend; "
                    "use --cuda off",
                    tree.dir.string()));
  }
  KV_TRY(check_cuda_version(arch, tools.cuda_version));
  if (tree.fork == plan::Fork::kIk && tools.cmake_version && older_than(*tools.cmake_version, {3, 25, 2})) {
    // ik sets CMAKE_CXX_STANDARD 20, which its CUDA sources inherit; CMake's nvcc flag table
    // knows C++20 only since 3.25.2 ("Target ggml requires the language dialect CUDA20").
    plan.warnings.push_back(fmt::format(
        "cmake {} cannot configure ik_llama.cpp's CUDA backend (C++20 for nvcc needs CMake 3.25.2 or newer; "
        "Ubuntu 22.04 / JetPack 6 ship 3.22): install a newer cmake (pip install cmake, or apt.kitware.com)",
        *tools.cmake_version));
  }
  plan.reasons.push_back(fmt::format(
      "cuda: on, CMAKE_CUDA_ARCHITECTURES={} for {}: only the device's architecture, not the fork's "
      "default list, which multiplies nvcc's time and memory",
      arch, describe_device(device)));
  if (tools.nvcc) {
    plan.reasons.push_back(fmt::format(
        "nvcc: {}{}", *tools.nvcc, tools.cuda_version ? fmt::format(" (CUDA {})", *tools.cuda_version) : ""));
  } else if (tools.windows) {
    plan.warnings.push_back(
        "nvcc.exe not found (--nvcc, %CUDACXX%, PATH, %CUDA_PATH%\\bin): a build stops before configuring; "
        "install the CUDA toolkit for Windows after Visual Studio, or pass --nvcc PATH");
  } else {
    plan.warnings.push_back(
        "nvcc not found (PATH, $CUDACXX, /usr/local/cuda/bin): a build stops before configuring; install the "
        "CUDA toolkit (on a Jetson: sudo apt install nvidia-jetpack or cuda-toolkit) or pass --nvcc PATH");
  }
  if (tools.windows) {
    plan.reasons.push_back(
        "runtime: llama-server.exe loads cudart64_*.dll, cublas64_*.dll and cublasLt64_*.dll at start; they "
        "are copied from nvcc's folder next to it, so OUT\\bin runs without the toolkit on PATH");
  }
  return CudaDecision{.on = true, .arch = arch};
}

// --- flash attention kernels -------------------------------------------------------------

bool quantized(const std::string& type) { return type != "f16" && type != "f32" && type != "bf16"; }

// The K/V pairs the fork's CMake compiles into the CUDA FA vector kernels without
// GGML_CUDA_FA_ALL_QUANTS (mainline ggml/src/ggml-cuda/CMakeLists.txt; for ik see the header).
bool mainline_default_pair(const KvPair& kv) {
  return kv.k == kv.v && (kv.k == "f16" || kv.k == "q4_0" || kv.k == "q8_0" || kv.k == "bf16");
}

bool decide_fa_all_quants(const SourceTree& tree, bool cuda, const BuildRequest& request, BuildPlan& plan) {
  if (!cuda) {
    if (request.fa_kv) {
      plan.reasons.push_back(
          fmt::format("fa: K {} / V {} with flash attention runs on the CPU backend, which has "
                      "every pair{}",
                      request.fa_kv->k, request.fa_kv->v,
                      tree.fork == plan::Fork::kIk ? " (GGML_IQK_FA_ALL_QUANTS is on by default)" : ""));
    }
    return false;
  }
  bool want = false;
  std::string why;
  if (request.fa_all_quants) {
    want = true;
    why = "--fa-all-quants";
  } else if (!request.fa_kv) {
    why =
        "the plan's KV is not given as quantized with flash attention (--kv-quant); f16 needs no extra "
        "kernels";
  } else if (!quantized(request.fa_kv->k) && !quantized(request.fa_kv->v)) {
    why = fmt::format("K {} / V {} is not quantized", request.fa_kv->k, request.fa_kv->v);
  } else if (tree.fork == plan::Fork::kIk) {
    want = true;
    why = fmt::format(
        "K {} / V {} with flash attention: ik compiles its quantized FA kernels by default for head "
        "size 128 and seven K/V pairs only and aborts on any other",
        request.fa_kv->k, request.fa_kv->v);
  } else if (mainline_default_pair(*request.fa_kv)) {
    why = fmt::format(
        "K {} / V {} is among the pairs mainline compiles by default (f16, q4_0, q8_0, bf16 with K == V); "
        "--fa-all-quants builds every pair (many more kernels to compile)",
        request.fa_kv->k, request.fa_kv->v);
  } else {
    want = true;
    why = fmt::format(
        "K {} / V {} with flash attention: without it mainline's CUDA backend has no kernel for the "
        "pair and runs attention on the CPU",
        request.fa_kv->k, request.fa_kv->v);
  }
  if (!tree.declares("GGML_CUDA_FA_ALL_QUANTS")) {
    if (want)
      plan.warnings.push_back(
          "this tree declares no GGML_CUDA_FA_ALL_QUANTS: the quantized FA kernels cannot be "
          "selected (" +
          why + ")");
    return false;
  }
  plan.reasons.push_back(fmt::format("fa: GGML_CUDA_FA_ALL_QUANTS={}: {}", on_off(want), why));
  return want;
}

// --- CPU flags ---------------------------------------------------------------------------

void cpu_flags(const SourceTree& tree, const device::Facts& device, const BuildRequest& request,
               CmakeArgs& cmake, BuildPlan& plan) {
  const std::string& arch = device.arch;
  if (arch == "x86_64" || arch == "amd64") {
    if (request.native_cpu) {
      cmake.flag("GGML_NATIVE", true);
      plan.reasons.push_back("cpu: GGML_NATIVE=ON (--native-cpu): -march=native of the build machine");
      if (tree.fork == plan::Fork::kMainline && tree.declares("GGML_AMX_INT8") && !plan.windows) {
        plan.warnings.push_back(
            "--native-cpu on a CPU with AMX enables ggml's AMX matmul path, which crashes the "
            "pinned release (SIGSEGV in ggml_backend_amx_mul_mat) on q8_0 weights");
      }
      return;
    }
    cmake.flag("GGML_NATIVE", false);
    std::vector<std::string> on;
    for (std::string_view option :
         {"GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2"}) {
      // MSVC: mainline declares FMA and F16C only `if (NOT MSVC)`, ik notes that F16C comes
      // with AVX2 there, and /arch:AVX2 (what GGML_AVX2 sets) also emits FMA.
      const bool msvc_implied = plan.windows && (option == "GGML_FMA" || option == "GGML_F16C");
      if (!tree.declares(option) || msvc_implied) continue;
      cmake.flag(option, true);
      on.emplace_back(option.substr(5));
    }
    plan.reasons.push_back(fmt::format(
        "cpu: x86-64 with GGML_NATIVE=OFF and {}: -march=native on a CPU with AMX enables ggml's AMX matmul "
        "path, "
        "which crashes the pinned release on q8_0 weights; the binary also runs on any AVX2 machine "
        "(--native-cpu overrides)",
        fmt::join(on, "/")));
    return;
  }
  if (arch == "aarch64" || arch == "arm64") {
    cmake.flag("GGML_NATIVE", true);
    plan.reasons.push_back(
        "cpu: aarch64 with GGML_NATIVE=ON: the build runs on the board it is for, whose CPU "
        "features (dotprod, fp16, SVE on Thor) the compiler detects");
    return;
  }
  plan.reasons.push_back(
      fmt::format("cpu: the tree's default flags for '{}'", arch.empty() ? "unknown" : arch));
}

// --- targets -----------------------------------------------------------------------------

void target_options(const SourceTree& tree, CmakeArgs& cmake, BuildPlan& plan) {
  const bool in_tools = tree.server_dir == "tools/server";
  cmake.flag("LLAMA_BUILD_TESTS", false);
  cmake.flag("LLAMA_BUILD_EXAMPLES", !in_tools);
  if (in_tools) cmake.flag("LLAMA_BUILD_TOOLS", true);
  cmake.flag("LLAMA_BUILD_SERVER", true);
  cmake.flag("LLAMA_BUILD_APP", false);
  cmake.flag("LLAMA_BUILD_UI", false);
  cmake.flag("LLAMA_USE_PREBUILT_UI", false);
  cmake.flag("LLAMA_OPENSSL", false);
  cmake.flag("LLAMA_CURL", false);
  plan.reasons.push_back(
      fmt::format("targets: the server in {} ({}), no tests, no web UI download, no HTTPS or curl (kvgate "
                  "fronts the server and "
                  "passes model files); BUILD_SHARED_LIBS=OFF so bin/llama-server is one file to copy",
                  tree.server_dir, in_tools ? "LLAMA_BUILD_TOOLS" : "LLAMA_BUILD_EXAMPLES"));
}

std::string format_gib(uint64_t bytes) { return util::format_bytes(bytes); }

void memory_warnings(const device::Facts& device, const BuildPlan& plan,
                     std::span<const RunningInstance> running, std::vector<std::string>& warnings) {
  const JobsChoice& j = plan.jobs;
  if (j.below_one_job) {
    warnings.push_back(
        fmt::format("only {} available: one {} job needs about {}; the build may be killed for memory. Free "
                    "memory first{}",
                    format_gib(device.mem_available), plan.cuda ? "nvcc" : "compiler",
                    format_gib(j.per_job_bytes), running.empty() ? " (or add swap)" : ""));
  }
  if (!j.memory_short || running.empty()) return;
  for (const auto& r : running) {
    const std::string how =
        plan.windows
            ? "(its stop event, as Ctrl-C does), or stop it yourself: Ctrl-C in its console"
            : fmt::format(
                  "(SIGTERM, as Ctrl-C or systemctl stop do), or stop it yourself: kill -TERM {} (under a "
                  "service manager: stop the service)",
                  r.pid);
    warnings.push_back(fmt::format(
        "{} is running{}{}: memory limits -j to {}; pass --stop-running to stop it first {}", r.description,
        r.resident_bytes > 0 ? fmt::format(" (resident {})", format_gib(r.resident_bytes)) : std::string(),
        device.unified_memory ? " and holds the memory nvcc needs (CPU and GPU share it on a Jetson)" : "",
        j.jobs, how));
  }
}

// --- generator and toolchain ----------------------------------------------------------

std::string forward_slashes(std::string path) {
  std::replace(path.begin(), path.end(), '\\', '/');
  return path;
}

// Windows: the compiler's environment and the generator; adds "-G ..." to `args`. True when
// the generator is multi-config (Visual Studio: --config Release, bin/Release/).
bool choose_windows_generator(const Toolchain& tools, bool cuda, std::vector<std::string>& args,
                              BuildPlan& plan) {
  const std::string why_msvc =
      cuda ? "nvcc on Windows takes only MSVC as its host compiler" : "both forks' Windows builds use it";
  if (tools.msvc_on_path) {
    plan.reasons.push_back(
        fmt::format("toolchain: MSVC, cl.exe already on PATH (a developer prompt): {}", why_msvc));
  } else if (tools.visual_studio) {
    const VisualStudio& vs = *tools.visual_studio;
    plan.vcvars = vs.vcvars;
    plan.reasons.push_back(
        fmt::format("toolchain: MSVC{}, in the environment of {}: {}",
                    vs.path.empty() ? "" : fmt::format(" of Visual Studio {} in {}", vs.version, vs.path),
                    plan.vcvars, why_msvc));
  } else {
    plan.warnings.push_back(
        "Visual Studio with the x64 C++ tools not found (vswhere.exe lists none, cl.exe is not on PATH): "
        "install "
        "\"Build Tools for Visual Studio 2022\" with the \"Desktop development with C++\" workload (before "
        "the "
        "CUDA toolkit, so CUDA adds its Visual Studio integration), or run from its \"x64 Native Tools\" "
        "prompt, "
        "or pass --vcvars PATH");
  }
  const std::string vs_generator = tools.visual_studio ? tools.visual_studio->generator() : "";
  if (tools.ninja || vs_generator.empty()) {
    args.insert(args.end(), {"-G", "Ninja"});
    plan.reasons.push_back(
        "generator: Ninja (Visual Studio's \"C++ CMake tools\" install it), single-config Release");
    return false;
  }
  args.insert(args.end(), {"-G", vs_generator, "-A", "x64"});
  plan.reasons.push_back(fmt::format(
      "generator: {} (no ninja found): multi-config, built with --config Release into bin\\Release",
      vs_generator));
  return true;
}

bool choose_generator(const Toolchain& tools, bool cuda, std::vector<std::string>& args, BuildPlan& plan) {
  if (tools.windows) return choose_windows_generator(tools, cuda, args, plan);
  if (tools.ninja) {
    args.insert(args.end(), {"-G", "Ninja"});
  } else {
    plan.reasons.push_back(
        "generator: ninja not found, CMake's default (make); apt install ninja-build is faster");
  }
  return false;
}

}  // namespace

Result<KvPair> parse_kv_pair(std::string_view text, plan::Fork fork) {
  const size_t comma = text.find(',');
  const std::string_view k = text.substr(0, comma);
  const std::string_view v = comma == std::string_view::npos ? k : text.substr(comma + 1);
  auto kt = plan::parse_kv_type(k, fork);
  if (!kt) return std::move(kt).error().with_context("--kv-quant K");
  auto vt = plan::parse_kv_type(v, fork);
  if (!vt) return std::move(vt).error().with_context("--kv-quant V");
  return KvPair{.k = kt->name, .v = vt->name};
}

JobsChoice choose_jobs(uint64_t mem_available, unsigned cores, bool cuda, std::optional<unsigned> requested) {
  JobsChoice j;
  cores = std::max(1U, cores);
  j.per_job_bytes = cuda ? kCudaJobBytes : kCxxJobBytes;
  const char* kind = cuda ? "nvcc" : "g++";
  if (mem_available == 0) {  // not readable: the cores decide
    j.by_memory = cores;
    j.jobs = requested.value_or(cores);
    j.reason = requested ? fmt::format("jobs: -j{} (--jobs); MemAvailable is unknown", j.jobs)
                         : fmt::format("jobs: -j{}, one per core; MemAvailable is unknown", j.jobs);
    return j;
  }
  const uint64_t usable = mem_available > kBuildReserveBytes ? mem_available - kBuildReserveBytes : 0;
  j.by_memory = static_cast<unsigned>(
      std::min<uint64_t>(usable / j.per_job_bytes, std::numeric_limits<unsigned>::max()));
  j.below_one_job = j.by_memory == 0;
  j.memory_short = j.by_memory < cores;
  const std::string figures =
      fmt::format("{} available, {} kept for the system, about {} per {} job: {} job(s) fit; {} core(s)",
                  format_gib(mem_available), format_gib(kBuildReserveBytes), format_gib(j.per_job_bytes),
                  kind, j.by_memory, cores);
  if (requested) {
    j.jobs = std::max(1U, *requested);
    j.reason = fmt::format("jobs: -j{} (--jobs); {}", j.jobs, figures);
    return j;
  }
  j.jobs = std::max(1U, std::min(cores, j.by_memory));
  j.reason = fmt::format("jobs: -j{} ({}): {}", j.jobs,
                         j.memory_short ? "memory limits it" : "the cores limit it", figures);
  return j;
}

Result<BuildPlan> plan_build(const SourceTree& tree, const device::Facts& device, const Toolchain& tools,
                             const BuildRequest& request, std::span<const RunningInstance> running) {
  BuildPlan plan;
  plan.windows = tools.windows;
  plan.build_dir = request.build_dir.empty() ? tree.dir / "build-kvgate" : request.build_dir;
  plan.binary = plan.build_dir / "bin" / (request.target + (tools.windows ? ".exe" : ""));
  plan.reasons.push_back(
      fmt::format("fork: {}: {}{}", tree.fork == plan::Fork::kIk ? "ik_llama.cpp" : "mainline llama.cpp",
                  tree.fork_evidence, tree.commit.empty() ? "" : fmt::format("; commit {}", tree.commit)));

  KV_ASSIGN_OR_RETURN(const CudaDecision cuda, decide_cuda(tree, device, tools, request, plan));
  plan.cuda = cuda.on;
  plan.cuda_arch = cuda.arch;
  plan.fa_all_quants = decide_fa_all_quants(tree, cuda.on, request, plan);

  CmakeArgs cmake{.tree = tree, .args = {"cmake", "-S", tree.dir.string(), "-B", plan.build_dir.string()}};
  const bool multi_config = choose_generator(tools, cuda.on, cmake.args, plan);
  if (!multi_config) cmake.set("CMAKE_BUILD_TYPE", "Release");
  cmake.flag("BUILD_SHARED_LIBS", false);
  cpu_flags(tree, device, request, cmake, plan);
  cmake.flag("GGML_CUDA", cuda.on);
  if (cuda.on) {
    cmake.set("CMAKE_CUDA_ARCHITECTURES", cuda.arch);
    if (tools.nvcc)
      cmake.set("CMAKE_CUDA_COMPILER", tools.windows ? forward_slashes(*tools.nvcc) : *tools.nvcc);
    cmake.flag("GGML_CUDA_FA_ALL_QUANTS", plan.fa_all_quants);
  }
  cmake.flag("GGML_METAL", false);
  cmake.flag("GGML_VULKAN", false);
  target_options(tree, cmake, plan);
  plan.configure = std::move(cmake.args);

  plan.jobs = choose_jobs(device.mem_available, tools.cores, cuda.on, request.jobs);
  plan.reasons.push_back(plan.jobs.reason);
  if (request.jobs && plan.jobs.by_memory < *request.jobs && device.mem_available > 0) {
    plan.warnings.push_back(
        fmt::format("--jobs {} is more than the {} job(s) the free memory holds: the build may be "
                    "killed for memory",
                    *request.jobs, plan.jobs.by_memory));
  }
  memory_warnings(device, plan, running, plan.warnings);
  plan.build = {"cmake",        "--build", plan.build_dir.string(),       "--target",
                request.target, "-j",      std::to_string(plan.jobs.jobs)};
  if (multi_config) {
    plan.build.insert(plan.build.begin() + 3, {"--config", "Release"});
    plan.binary = plan.build_dir / "bin" / "Release" / plan.binary.filename();
  }
  return plan;
}

nlohmann::json build_record(const SourceTree& tree, const device::Facts& device, const BuildPlan& plan,
                            const std::string& version_output, const std::string& date) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : device.gpus) {
    gpus.push_back(
        {{"name", g.name}, {"compute_capability", g.compute_capability}, {"memory_total", g.memory_total}});
  }
  nlohmann::json dev = {{"arch", device.arch},
                        {"mem_total", device.mem_total},
                        {"mem_available", device.mem_available},
                        {"unified_memory", device.unified_memory},
                        {"gpus", gpus}};
  if (device.jetson) {
    dev["jetson"] = {{"model", device.jetson->model},
                     {"soc", device.jetson->soc},
                     {"jetpack", device.jetson->jetpack},
                     {"l4t_release", device.jetson->l4t_release}};
  }
  return {{"record", "kvgate engine build 1"},
          {"fork", plan::fork_name(tree.fork)},
          {"source", tree.dir.string()},
          {"commit", tree.commit},
          {"binary", (fs::path("bin") / plan.binary.filename()).generic_string()},
          {"cuda", plan.cuda},
          {"cuda_arch", plan.cuda_arch},
          {"fa_all_quants", plan.fa_all_quants},
          {"jobs", plan.jobs.jobs},
          {"configure", plan.configure},
          {"build", plan.build},
          {"reasons", plan.reasons},
          {"device", dev},
          {"date", date},
          {"version", version_output}};
}

}  // namespace kvgate::engine
