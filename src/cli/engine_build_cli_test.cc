// `kvgate engine build --dry-run` run as a program against fake source trees of both forks
// and the recorded device trees (tests/fixtures/device/): the printed commands are what the
// forks' CMake accepts for Orin, Thor, an x86 PC with an RTX 4070 and a CPU-only PC. kvgate.exe
// plans Windows builds instead (MSVC in vcvars64.bat's environment), tested under wine with a
// batch file standing in for each Windows tool.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#ifndef _WIN32
#include <sched.h>
#endif
#include <unistd.h>

#include "testing/cli_test_support.h"
#include "testing/paths.h"
#include "util/subprocess.h"

namespace kvgate::cli {
namespace {

using testing::Ran;

namespace fs = std::filesystem;

const fs::path kRoot = fs::temp_directory_path() / ("kvgate_engine_build_cli_" + std::to_string(::getpid()));

// A cache of its own: no kvgate up of other tests counts as running.
Ran kvgate(const std::vector<std::string>& args) {
  return testing::run_kvgate(args, {{"XDG_CACHE_HOME", (kRoot / "cache").string()}});
}

std::string line_starting(const std::string& output, std::string_view prefix) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(prefix)) return line;
  }
  return "";
}

void write(const fs::path& p, std::string_view text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string fixture(std::string_view name) {
  return std::string(kvgate::testing::source_dir()) + "/tests/fixtures/device/" + std::string(name);
}

// The CPUs this test may use: what the command assumes for a device tree without a CPU list.
unsigned local_cores() {
#ifdef _WIN32
  return std::max(1U, std::thread::hardware_concurrency());
#else
  cpu_set_t set;
  CPU_ZERO(&set);
  return ::sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<unsigned>(CPU_COUNT(&set)) : 1U;
#endif
}

#ifdef _WIN32
constexpr bool kWindows = true;
#else
constexpr bool kWindows = false;
#endif

#define SKIP_UNLESS_LINUX_PLANS()                                                           \
  if (kWindows)                                                                             \
  GTEST_SKIP() << "kvgate.exe plans Windows builds: the Linux plans are the Linux build's " \
                  "tests"
#define SKIP_UNLESS_WINDOWS_PLANS() \
  if (!kWindows)                    \
  GTEST_SKIP() << "kvgate.exe plans Windows builds (scripts/cross-windows.sh runs it under wine)"

class EngineBuildCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::remove_all(kRoot);
    write(mainline() / "CMakeLists.txt",
          "option(LLAMA_BUILD_TESTS \"\" ON)\noption(LLAMA_BUILD_TOOLS \"\" ON)\noption(LLAMA_BUILD_EXAMPLES "
          "\"\" ON)\n"
          "option(LLAMA_BUILD_SERVER \"\" ON)\noption(LLAMA_BUILD_APP \"\" ON)\noption(LLAMA_BUILD_UI \"\" "
          "OFF)\n"
          "option(LLAMA_USE_PREBUILT_UI \"\" ON)\noption(LLAMA_OPENSSL \"\" ON)\n");
    write(mainline() / "ggml/CMakeLists.txt",
          "option(BUILD_SHARED_LIBS \"\" ON)\noption(GGML_NATIVE \"\" ON)\noption(GGML_SSE42 \"\" ON)\n"
          "option(GGML_AVX \"\" ON)\noption(GGML_AVX2 \"\" ON)\noption(GGML_BMI2 \"\" ON)\noption(GGML_FMA "
          "\"\" ON)\n"
          "option(GGML_F16C \"\" ON)\noption(GGML_AMX_INT8 \"\" OFF)\noption(GGML_CUDA \"\" OFF)\n"
          "option(GGML_CUDA_FA_ALL_QUANTS \"\" OFF)\noption(GGML_VULKAN \"\" OFF)\noption(GGML_METAL \"\" "
          "OFF)\n");
    write(mainline() / "include/llama.h", "");
    write(mainline() / "ggml/src/ggml-cpu/ggml-cpu.c", "");
    write(mainline() / "tools/server/CMakeLists.txt", "");
    write(ik() / "CMakeLists.txt",
          "option(BUILD_SHARED_LIBS \"\" ON)\noption(LLAMA_BUILD_TESTS \"\" ON)\noption(LLAMA_BUILD_EXAMPLES "
          "\"\" ON)\n"
          "option(LLAMA_BUILD_SERVER \"\" ON)\noption(LLAMA_CURL \"\" OFF)\n");
    write(ik() / "ggml/CMakeLists.txt",
          "option(GGML_NATIVE \"\" ON)\noption(GGML_AVX \"\" ON)\noption(GGML_AVX2 \"\" ON)\noption(GGML_FMA "
          "\"\" ON)\n"
          "option(GGML_F16C \"\" ON)\noption(GGML_CUDA \"\" OFF)\noption(GGML_CUDA_FA_ALL_QUANTS \"\" OFF)\n"
          "option(GGML_IQK_FA_ALL_QUANTS \"\" ON)\noption(GGML_VULKAN \"\" OFF)\noption(GGML_METAL \"\" "
          "OFF)\n");
    write(ik() / "include/llama.h", "");
    write(ik() / "ggml/src/iqk/iqk_mul_mat.cpp", "");
    write(ik() / "examples/server/CMakeLists.txt", "");
  }
  static void TearDownTestSuite() { fs::remove_all(kRoot); }

  static fs::path mainline() { return kRoot / "llama.cpp"; }
  static fs::path ik() { return kRoot / "ik_llama.cpp"; }
};

TEST_F(EngineBuildCli, OrinIkWithQuantizedKv) {
  SKIP_UNLESS_LINUX_PLANS();
  const auto r = kvgate({"engine", "build", ik().string(), "--dry-run", "--kv-quant", "q4_0", "--nvcc",
                         "/usr/local/cuda/bin/nvcc", "--device-root", fixture("orin-agx-32g")});
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string s = ik().string();
  EXPECT_EQ(
      line_starting(r.output, "cmake -S"),
      "cmake -S " + s + " -B " + s +
          "/build-kvgate -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "
          "-DGGML_NATIVE=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=87 "
          "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DGGML_CUDA_FA_ALL_QUANTS=ON -DGGML_METAL=OFF "
          "-DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON "
          "-DLLAMA_CURL=OFF")
      << r.output;
  // MemAvailable 27.3 GiB - 1 GiB kept: six 4 GiB nvcc jobs on the 8 online cores.
  EXPECT_EQ(line_starting(r.output, "cmake --build"),
            "cmake --build " + s + "/build-kvgate --target llama-server -j 6");
  EXPECT_NE(r.output.find("# fork: ik_llama.cpp"), std::string::npos);
  EXPECT_NE(r.output.find("# jobs: -j6 (memory limits it)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(s + "/build-kvgate"));  // a dry run runs nothing
}

TEST_F(EngineBuildCli, ThorMainline) {
  SKIP_UNLESS_LINUX_PLANS();
  const auto r = kvgate({"engine", "build", mainline().string(), "--dry-run", "--kv-quant", "q8_0", "--nvcc",
                         "/usr/local/cuda/bin/nvcc", "--device-root", fixture("thor-agx")});
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string s = mainline().string();
  EXPECT_EQ(
      line_starting(r.output, "cmake -S"),
      "cmake -S " + s + " -B " + s +
          "/build-kvgate -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "
          "-DGGML_NATIVE=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=110 "
          "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DGGML_CUDA_FA_ALL_QUANTS=OFF -DGGML_METAL=OFF "
          "-DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON "
          "-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF "
          "-DLLAMA_OPENSSL=OFF")
      << r.output;
  // 116 GiB available holds 28 nvcc jobs: the 14 cores decide.
  EXPECT_EQ(line_starting(r.output, "cmake --build"),
            "cmake --build " + s + "/build-kvgate --target llama-server -j 14");
}

TEST_F(EngineBuildCli, X86WithRtx4070) {
  SKIP_UNLESS_LINUX_PLANS();
  const auto r = kvgate({"engine", "build", mainline().string(), "--dry-run", "--kv-quant", "q8_0,q4_0",
                         "--nvcc", "/usr/local/cuda/bin/nvcc", "--device-root", fixture("x86-rtx4070"),
                         "--nvidia-smi-output", fixture("x86-rtx4070") + "/nvidia-smi.csv"});
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string s = mainline().string();
  EXPECT_EQ(
      line_starting(r.output, "cmake -S"),
      "cmake -S " + s + " -B " + s +
          "/build-kvgate -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "
          "-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
          "-DGGML_BMI2=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=89 "
          "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DGGML_CUDA_FA_ALL_QUANTS=ON -DGGML_METAL=OFF "
          "-DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON "
          "-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF "
          "-DLLAMA_OPENSSL=OFF")
      << r.output;
  // 55.4 GiB available holds 13 nvcc jobs; the tree lists no CPUs, so this machine's count.
  const unsigned jobs = std::min(local_cores(), 13U);
  EXPECT_EQ(line_starting(r.output, "cmake --build"),
            "cmake --build " + s + "/build-kvgate --target llama-server -j " + std::to_string(jobs));
}

TEST_F(EngineBuildCli, X86CpuOnlyAndErrors) {
  const auto r = kvgate({"engine", "build", mainline().string(), "--dry-run", "--device-root",
                         fixture("x86-cpu"), "--build-dir", "/w/build"});
  ASSERT_EQ(r.code, 0) << r.output;
  if (kWindows) {  // the same device planned by kvgate.exe: MSVC, so no FMA/F16C; the .exe
    EXPECT_NE(line_starting(r.output, "cmake -S ").find(" -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_CUDA=OFF"),
              std::string::npos)
        << r.output;
  } else {
    EXPECT_EQ(
        line_starting(r.output, "cmake -S"),
        "cmake -S " + mainline().string() +
            " -B /w/build -G Ninja -DCMAKE_BUILD_TYPE=Release "
            "-DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON "
            "-DGGML_FMA=ON "
            "-DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF "
            "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON "
            "-DLLAMA_BUILD_SERVER=ON "
            "-DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF");
  }
  EXPECT_NE(r.output.find("# cpu: x86-64 with GGML_NATIVE=OFF"), std::string::npos);

  const auto on = kvgate({"engine", "build", mainline().string(), "--dry-run", "--cuda", "on",
                          "--device-root", fixture("x86-cpu")});
  EXPECT_EQ(on.code, 1) << on.output;
  EXPECT_NE(on.output.find("no NVIDIA GPU"), std::string::npos);
  EXPECT_EQ(kvgate({"engine", "build", kRoot.string(), "--dry-run"}).code, 1);  // not a source tree
  EXPECT_EQ(kvgate({"engine", "build", mainline().string()}).code, 2);          // --out missing
  EXPECT_EQ(kvgate({"engine", "build", ik().string(), "--dry-run", "--kv-quant", "q9"}).code, 2);
  EXPECT_EQ(kvgate({"engine"}).code, 2);
}

// The Windows tools kvgate.exe looks for, as batch files: nvcc answers --version, vcvars64.bat
// sets INCLUDE and puts a cmake on PATH that logs what it sees and, for --build, leaves an
// .exe where the build would; the CUDA runtime DLLs lie beside nvcc.
struct WindowsTools {
  fs::path nvcc = kRoot / "CUDA" / "bin" / "nvcc.bat";
  fs::path vcvars = kRoot / "VS" / "vcvars64.bat";
  fs::path smi = kRoot / "nvidia-smi.csv";

  WindowsTools() {
    write(nvcc, "@echo Cuda compilation tools, release 12.6, V12.6.85\r\n");
    for (const char* dll : {"cudart64_12.dll", "cublas64_12.dll", "cublasLt64_12.dll", "cufft64_11.dll"})
      write(nvcc.parent_path() / dll, "dll");
    write(vcvars, "@set INCLUDE=C:\\kvgate-test\\include\r\n@set PATH=" + (kRoot / "VS" / "bin").string() +
                      ";%PATH%\r\n");
    write(kRoot / "VS" / "bin" / "cmake.bat",
          "@echo off\r\necho cmake sees INCLUDE=%INCLUDE%\r\n"
          "if \"%~1\"==\"--build\" (\r\n  mkdir \"%~2\\bin\" 2>nul\r\n"
          "  copy /y \"%SystemRoot%\\system32\\hostname.exe\" \"%~2\\bin\\llama-server.exe\" >nul\r\n)\r\n"
          "exit /b 0\r\n");
    // The second field report's card (nvidia-smi's query, as device/facts.h reads it).
    write(smi, "NVIDIA GeForce RTX 3060, 8.6, 12288, 11800, 210, 2100\n");
  }
};

TEST_F(EngineBuildCli, WindowsCudaPlanForAnRtx3060) {
  SKIP_UNLESS_WINDOWS_PLANS();
  const WindowsTools tools;
  const auto r = kvgate({"engine", "build", ik().string(), "--dry-run", "--kv-quant", "q4_0", "--nvcc",
                         tools.nvcc.string(), "--vcvars", tools.vcvars.string(), "--nvidia-smi-output",
                         tools.smi.string()});
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string s = ik().string();
  std::string nvcc = tools.nvcc.string();
  std::replace(nvcc.begin(), nvcc.end(), '\\', '/');
  EXPECT_EQ(line_starting(r.output, "call "), "call " + util::windows_quote(tools.vcvars.string()))
      << r.output;
  EXPECT_EQ(
      line_starting(r.output, "cmake -S"),
      "cmake -S " + s + " -B " + s +
          "\\build-kvgate -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF "
          "-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=86 -DCMAKE_CUDA_COMPILER=" +
          nvcc +
          " -DGGML_CUDA_FA_ALL_QUANTS=ON -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF "
          "-DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF")
      << r.output;
  EXPECT_TRUE(line_starting(r.output, "cmake --build")
                  .starts_with("cmake --build " + s + "\\build-kvgate --target llama-server -j "))
      << r.output;
  EXPECT_NE(r.output.find("# nvcc: " + tools.nvcc.string() + " (CUDA 12.6)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("NVIDIA GeForce RTX 3060 (compute 8.6)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(s + "\\build-kvgate"));
}

TEST_F(EngineBuildCli, WindowsBuildRunsInTheVcvarsEnvironment) {
  SKIP_UNLESS_WINDOWS_PLANS();
  const WindowsTools tools;
  const fs::path out = kRoot / "out";
  const auto r = kvgate({"engine", "build", mainline().string(), "--out", out.string(), "--build-dir",
                         (kRoot / "build").string(), "--nvcc", tools.nvcc.string(), "--vcvars",
                         tools.vcvars.string(), "--nvidia-smi-output", tools.smi.string()});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out / "bin" / "llama-server.exe")) << r.output;
  for (const char* dll : {"cudart64_12.dll", "cublas64_12.dll", "cublasLt64_12.dll"})
    EXPECT_TRUE(fs::exists(out / "bin" / dll)) << dll;
  EXPECT_FALSE(fs::exists(out / "bin" / "cufft64_11.dll"));  // llama-server does not load it
  std::ifstream log(out / "logs" / "configure.log");
  const std::string text(std::istreambuf_iterator<char>(log), {});
  EXPECT_NE(text.find("cmake sees INCLUDE=C:\\kvgate-test\\include"), std::string::npos) << text;
  std::ifstream record(out / "BUILD.json");
  const std::string json(std::istreambuf_iterator<char>(record), {});
  EXPECT_NE(json.find("\"cuda_arch\": \"86\""), std::string::npos) << json;

  // A script that is not a Visual Studio environment: refused before anything is configured.
  write(kRoot / "VS" / "other.bat", "@echo hello\r\n");
  const auto bad = kvgate({"engine", "build", mainline().string(), "--out", (kRoot / "out2").string(),
                           "--nvcc", tools.nvcc.string(), "--vcvars", (kRoot / "VS" / "other.bat").string(),
                           "--nvidia-smi-output", tools.smi.string()});
  EXPECT_EQ(bad.code, 1) << bad.output;
  EXPECT_NE(bad.output.find("set no INCLUDE"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace kvgate::cli
