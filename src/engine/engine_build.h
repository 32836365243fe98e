// Building llama-server from a source tree for the device it will run on (`kvgate engine
// build`).
//
// The planner is a pure function: the source tree (which fork, which CMake options it
// declares), the device (device::Facts), the toolchain found on the build machine and the
// caller's choices go in; the configure and build command lines come out, with a reason for
// every choice and the warnings to print. Nothing here runs a command; `cli/engine_build.cc`
// runs them and writes the build record.
//
// The choices, each measured against the two forks' CMake files:
//   fork      ik_llama.cpp has ggml/src/iqk/ (its CPU matmul and FA kernels); mainline has
//             ggml/src/ggml-cpu/ (the backend split of late 2024) or neither (older trees).
//             The server is tools/server (mainline since 2025) or examples/server (ik,
//             older mainline), which decides LLAMA_BUILD_TOOLS vs LLAMA_BUILD_EXAMPLES.
//   options   only options the tree declares (`option(NAME` / `set(NAME ... CACHE`) are
//             passed, so one recipe configures both forks and older trees without
//             "manually-specified variables were not used" noise.
//   CPU       x86-64: GGML_NATIVE=OFF with SSE4.2/AVX/AVX2/FMA/F16C/BMI2: -march=native on a
//             CPU with AMX enables mainline's AMX matmul path, which crashes the pinned
//             release (SIGSEGV in ggml_backend_amx_mul_mat on q8_0 weights). aarch64
//             (Jetson): GGML_NATIVE=ON, the build runs on the board it is for.
//   CUDA      GGML_CUDA=ON with CMAKE_CUDA_ARCHITECTURES from the device (87 Orin, 110 Thor
//             with CUDA 13, 89 RTX 40xx): one architecture instead of the fork's list of
//             five or more, which multiplies nvcc's time.
//   FA quants GGML_CUDA_FA_ALL_QUANTS when the plan runs quantized KV with flash attention
//             and the fork does not compile that K/V pair by default: mainline compiles
//             f16, q4_0, q8_0 and bf16 with K == V only (other pairs fall back to the CPU);
//             ik compiles seven pairs for head size 128 only and aborts on the rest, so ik
//             with any quantized KV gets it.
//   -j        from MemAvailable: about 4 GiB per nvcc job, 1 GiB per g++ job, 1 GiB kept
//             for the system, capped by the cores, at least 1.
//   Windows   (kvgate.exe) MSVC, the only host compiler nvcc takes there, in the environment
//             of Visual Studio's vcvars64.bat (engine/build_msvc.h); Ninja when there is one
//             (Visual Studio bundles it), else the Visual Studio generator and --config
//             Release; no GGML_FMA/GGML_F16C (MSVC's /arch:AVX2 implies them; mainline
//             declares them only for other compilers); the CUDA runtime DLLs beside the .exe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/facts.h"
#include "engine/build_msvc.h"
#include "engine/running_instance.h"
#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::engine {

// A llama.cpp-family source tree, as read from its files.
struct SourceTree {
  std::filesystem::path dir;
  plan::Fork fork = plan::Fork::kMainline;
  std::string fork_evidence;            // "ggml/src/iqk/ is present"
  std::string server_dir;               // "tools/server" or "examples/server"
  std::set<std::string> cmake_options;  // declared by CMakeLists.txt and ggml/CMakeLists.txt
  std::string commit;                   // HEAD when a git tree (filled by the caller); else empty

  bool declares(std::string_view option) const { return cmake_options.contains(std::string(option)); }
};

// Reads `dir`: the fork markers, the server's folder and the declared CMake options. Error
// when it is not a llama.cpp or ik_llama.cpp tree (names what is missing). `commit` is left
// empty.
Result<SourceTree> read_source_tree(const std::filesystem::path& dir);

// The option names a CMakeLists.txt text declares (`option(NAME ...)`, `set(NAME ... CACHE ...)`).
std::set<std::string> declared_cmake_options(std::string_view cmake_text);

enum class CudaChoice { kAuto, kOn, kOff };

// K and V cache types the plan runs with flash attention.
struct KvPair {
  std::string k;
  std::string v;
};

// "q8_0" (K and V) or "q8_0,q4_0" (K, V), checked against what `fork` accepts.
Result<KvPair> parse_kv_pair(std::string_view text, plan::Fork fork);

// What the caller asked for.
struct BuildRequest {
  CudaChoice cuda = CudaChoice::kAuto;
  std::optional<KvPair> fa_kv;      // the plan uses these KV types with flash attention
  bool fa_all_quants = false;       // compile every FA K/V pair regardless
  bool native_cpu = false;          // x86-64: GGML_NATIVE=ON despite the AMX crash
  std::optional<unsigned> jobs;     // --jobs
  std::filesystem::path build_dir;  // empty: <source>/build-kvgate
  std::string target = "llama-server";
};

// The build machine's tools.
struct Toolchain {
  std::optional<std::string> nvcc;            // path; nullopt: not found
  std::optional<std::string> cuda_version;    // "12.6" from `nvcc --version`
  std::optional<std::string> cmake_version;   // "3.25.1" from `cmake --version`
  bool ninja = true;                          // ninja on PATH (else CMake's default generator)
  unsigned cores = 1;                         // CPUs this build may use
  bool windows = false;                       // the build runs on Windows: MSVC, .exe, cmd.exe
  std::optional<VisualStudio> visual_studio;  // Windows: the newest with the x64 C++ tools
  bool msvc_on_path = false;                  // Windows: cl.exe already on PATH (a developer prompt)
};

inline constexpr uint64_t kGiB = 1024ULL * 1024 * 1024;
inline constexpr uint64_t kCudaJobBytes = 4 * kGiB;  // one nvcc job (cicc + ptxas on ggml-cuda)
inline constexpr uint64_t kCxxJobBytes = 1 * kGiB;   // one g++ job on ggml/llama sources
inline constexpr uint64_t kBuildReserveBytes = 1 * kGiB;

struct JobsChoice {
  unsigned jobs = 1;
  unsigned by_memory = 0;  // jobs the free memory allows
  uint64_t per_job_bytes = 0;
  bool memory_short = false;   // memory, not the cores, limits -j (or not even one job fits)
  bool below_one_job = false;  // not even one job fits into MemAvailable
  std::string reason;
};

// -j: `requested` if given, else min(cores, (mem_available - reserve) / per job), at least 1.
JobsChoice choose_jobs(uint64_t mem_available, unsigned cores, bool cuda, std::optional<unsigned> requested);

struct BuildPlan {
  std::vector<std::string> configure;  // argv of the cmake configure step
  std::vector<std::string> build;      // argv of the cmake build step
  std::filesystem::path build_dir;
  std::filesystem::path binary;  // <build_dir>/bin/<target> (Windows: .exe; bin/Release/ under VS)
  bool windows = false;          // the commands are for cmd.exe
  std::string vcvars;            // Windows: run the commands in this script's environment; empty: none
  bool cuda = false;
  std::string cuda_arch;  // empty without CUDA
  bool fa_all_quants = false;
  JobsChoice jobs;
  std::vector<std::string> reasons;  // one line per choice
  std::vector<std::string> warnings;
};

// REQUIRES: tree was read by read_source_tree. Error when the request cannot be built here
// (--cuda on without a GPU, an architecture the CUDA version cannot target, ...).
Result<BuildPlan> plan_build(const SourceTree& tree, const device::Facts& device, const Toolchain& tools,
                             const BuildRequest& request, std::span<const RunningInstance> running = {});

// The build record written as BUILD.json next to bin/: fork, commit, options, device, date,
// the commands and the binary's `--version` output.
nlohmann::json build_record(const SourceTree& tree, const device::Facts& device, const BuildPlan& plan,
                            const std::string& version_output, const std::string& date);

}  // namespace kvgate::engine
