// The build planner against hand-written expectations: the commands are what the forks'
// CMake files accept (option lists copied from mainline 80fb11a and ik_llama.cpp 8337e4cd3),
// for the devices kvgate is used on.
#include "engine/engine_build.h"

#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/pinned.h"
#include "util/subprocess.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t GiB = kGiB;

// Option lines as the real trees declare them (abridged).
constexpr const char* kMainlineRoot = R"cm(
option(LLAMA_BUILD_TESTS     "llama: build tests"                                                                ${LLAMA_STANDALONE})
option(LLAMA_BUILD_TOOLS     "llama: build tools"                                                                ${LLAMA_STANDALONE})
option(LLAMA_BUILD_EXAMPLES  "llama: build examples"                                                             ${LLAMA_STANDALONE})
option(LLAMA_BUILD_SERVER    "llama: build server example"                                                       ${LLAMA_STANDALONE})
option(LLAMA_BUILD_APP       "llama: build the unified binary"                                                   ${LLAMA_STANDALONE})
option(LLAMA_BUILD_UI        "llama: build the embedded Web UI for server"                                       OFF)
option(LLAMA_USE_PREBUILT_UI "llama: use prebuilt UI from HF Bucket when available" ON)
option(LLAMA_OPENSSL    "llama: use openssl to support HTTPS" ON)
option(BUILD_SHARED_LIBS "build shared libraries" ${BUILD_SHARED_LIBS_DEFAULT})
)cm";
constexpr const char* kMainlineGgml = R"cm(
option(BUILD_SHARED_LIBS           "ggml: build shared libraries" ${BUILD_SHARED_LIBS_DEFAULT})
option(GGML_NATIVE "ggml: optimize the build for the current system" ${GGML_NATIVE_DEFAULT})
option(GGML_SSE42            "ggml: enable SSE 4.2"          ${INS_ENB})
option(GGML_AVX              "ggml: enable AVX"              ${INS_ENB})
option(GGML_AVX2             "ggml: enable AVX2"             ${INS_ENB})
option(GGML_BMI2             "ggml: enable BMI2"             ${INS_ENB})
if (NOT MSVC)
    option(GGML_FMA          "ggml: enable FMA"              ${INS_ENB})
    option(GGML_F16C         "ggml: enable F16C"             ${INS_ENB})
    option(GGML_AMX_INT8     "ggml: enable AMX-INT8"         OFF)
endif()
set(GGML_CPU_ARM_ARCH        "" CACHE STRING "ggml: CPU architecture for ARM")
option(GGML_CUDA                            "ggml: use CUDA"                                  OFF)
option(GGML_CUDA_FA_ALL_QUANTS              "ggml: compile all quants for FlashAttention"     OFF)
option(GGML_VULKAN                          "ggml: use Vulkan"                                OFF)
option(GGML_METAL                           "ggml: use Metal"                                 ${GGML_METAL_DEFAULT})
)cm";
constexpr const char* kIkRoot = R"cm(
option(BUILD_SHARED_LIBS "build shared libraries" ${BUILD_SHARED_LIBS_DEFAULT})
option(LLAMA_BUILD_TESTS    "llama: build tests"          ${LLAMA_STANDALONE})
option(LLAMA_BUILD_EXAMPLES "llama: build examples"       ${LLAMA_STANDALONE})
option(LLAMA_BUILD_SERVER   "llama: build server example" ${LLAMA_STANDALONE})
option(LLAMA_CURL "llama: use libcurl to download model from an URL" OFF)
)cm";
constexpr const char* kIkGgml = R"cm(
option(GGML_NATIVE "ggml: enable -march=native flag"     ${GGML_NATIVE_DEFAULT})
option(GGML_AVX         "ggml: enable AVX"              ${INS_ENB})
option(GGML_AVX2        "ggml: enable AVX2"             ${INS_ENB})
option(GGML_FMA         "ggml: enable FMA"              ${INS_ENB})
if (NOT MSVC)
    option(GGML_F16C    "ggml: enable F16C"             ${INS_ENB}) # in MSVC F16C is implied with AVX2/AVX512
endif()
option(GGML_IQK_MUL_MAT                     "ggml: use optimized iqk matrix multiplications"  ON)
option(GGML_CUDA                            "ggml: use CUDA"                                  OFF)
set   (GGML_CUDA_PEER_MAX_BATCH_SIZE "128" CACHE STRING
                                            "ggml: max. batch size for using peer access")
option(GGML_CUDA_FA_ALL_QUANTS              "ggml: compile all quants for FlashAttention"     OFF)
option(GGML_IQK_FA_ALL_QUANTS               "ggml: compile all quants for IQK FlashAttention" ON)
option(GGML_VULKAN                          "ggml: use Vulkan"                                OFF)
option(GGML_METAL                           "ggml: use Metal"                                 ${GGML_METAL_DEFAULT})
)cm";

void write(const fs::path& p, std::string_view text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A source tree with the files the reader looks at.
class FakeTrees : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kvgate_engine_build_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    write(mainline_ / "CMakeLists.txt", kMainlineRoot);
    write(mainline_ / "ggml/CMakeLists.txt", kMainlineGgml);
    write(mainline_ / "include/llama.h", "");
    write(mainline_ / "ggml/src/ggml-cpu/ggml-cpu.c", "");
    write(mainline_ / "tools/server/CMakeLists.txt", "");
    write(ik_ / "CMakeLists.txt", kIkRoot);
    write(ik_ / "ggml/CMakeLists.txt", kIkGgml);
    write(ik_ / "include/llama.h", "");
    write(ik_ / "ggml/src/iqk/iqk_mul_mat.cpp", "");
    write(ik_ / "examples/server/CMakeLists.txt", "");
  }
  void TearDown() override { fs::remove_all(root_); }

  SourceTree tree(const fs::path& dir) {
    auto t = read_source_tree(dir);
    EXPECT_TRUE(t.ok()) << t.error().message();
    return t.ok() ? *t : SourceTree{};
  }

  fs::path root_;
  fs::path mainline_ =
      fs::temp_directory_path() / ("kvgate_engine_build_" + std::to_string(::getpid())) / "llama.cpp";
  fs::path ik_ =
      fs::temp_directory_path() / ("kvgate_engine_build_" + std::to_string(::getpid())) / "ik_llama.cpp";
};

device::Facts orin() {  // AGX Orin 32 GB, JetPack 6.2, the old server stopped
  device::Facts f;
  f.arch = "aarch64";
  f.mem_total = 30 * GiB + GiB / 2;
  f.mem_available = 28 * GiB;
  f.unified_memory = true;
  f.jetson = device::Jetson{.model = "NVIDIA Jetson AGX Orin Developer Kit",
                            .l4t_release = "R36 (release), REVISION: 4.3",
                            .jetpack = "6.2",
                            .soc = "orin"};
  f.gpus.push_back({.name = "Orin (nvgpu)", .compute_capability = "8.7", .memory_total = f.mem_total});
  return f;
}

device::Facts thor() {  // AGX Thor 128 GB, JetPack 7 (CUDA 13 calls it sm_110)
  device::Facts f;
  f.arch = "aarch64";
  f.mem_total = 122 * GiB;
  f.mem_available = 118 * GiB;
  f.unified_memory = true;
  f.jetson = device::Jetson{.model = "NVIDIA Jetson AGX Thor Developer Kit", .jetpack = "7.0", .soc = "thor"};
  f.gpus.push_back({.name = "NVIDIA Thor", .compute_capability = "11.0", .memory_total = f.mem_total});
  return f;
}

device::Facts rtx4070() {  // x86-64 PC, 32 GiB RAM, RTX 4070 12 GiB
  device::Facts f;
  f.arch = "x86_64";
  f.mem_total = 31 * GiB;
  f.mem_available = 26 * GiB;
  f.gpus.push_back({.name = "NVIDIA GeForce RTX 4070",
                    .compute_capability = "8.9",
                    .memory_total = 12 * GiB,
                    .memory_free = 11 * GiB});
  return f;
}

device::Facts x86_cpu() {
  device::Facts f;
  f.arch = "x86_64";
  f.mem_total = 16 * GiB;
  f.mem_available = 12 * GiB;
  return f;
}

Toolchain cuda_tools(unsigned cores, std::string version) {
  return {
      .nvcc = "/usr/local/cuda/bin/nvcc", .cuda_version = std::move(version), .ninja = true, .cores = cores};
}

// The words as CMake receives them, joined by spaces (no shell's quoting: paths differ by platform).
std::string words(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& w : argv) out += (out.empty() ? "" : " ") + w;
  return out;
}
std::string configure_line(const BuildPlan& p) { return words(p.configure); }
// The default build folder inside a source tree, spelled as this platform does.
std::string in_build(const std::string& source) { return (fs::path(source) / "build-kvgate").string(); }

bool mentions(const std::vector<std::string>& lines, std::string_view text) {
  for (const auto& l : lines) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST_F(FakeTrees, DetectsTheForkFromItsFiles) {
  const SourceTree m = tree(mainline_);
  EXPECT_EQ(m.fork, plan::Fork::kMainline);
  EXPECT_EQ(m.server_dir, "tools/server");
  EXPECT_TRUE(m.declares("GGML_BMI2"));
  EXPECT_TRUE(m.declares("GGML_CPU_ARM_ARCH"));  // set(... CACHE ...)
  const SourceTree ik = tree(ik_);
  EXPECT_EQ(ik.fork, plan::Fork::kIk);
  EXPECT_EQ(ik.server_dir, "examples/server");
  EXPECT_TRUE(ik.declares("GGML_CUDA_PEER_MAX_BATCH_SIZE"));  // "set   (" with a CACHE on the next line
  EXPECT_FALSE(ik.declares("GGML_BMI2"));
  EXPECT_FALSE(ik.declares("LLAMA_BUILD_TOOLS"));
}

TEST_F(FakeTrees, RefusesWhatIsNotALlamaTree) {
  fs::remove(mainline_ / "include/llama.h");
  auto t = read_source_tree(mainline_);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message().find("include/llama.h is missing"), std::string::npos);
  fs::remove_all(ik_ / "examples/server");
  auto u = read_source_tree(ik_);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.error().message().find("no llama-server"), std::string::npos);
  EXPECT_FALSE(read_source_tree(root_ / "absent").ok());
}

TEST(DeclaredCmakeOptions, ReadsOptionsAndCacheEntriesOnly) {
  const auto names = declared_cmake_options(R"cm(
# option(COMMENTED "no" OFF)
option(A "a" ON)
OPTION( B "b (with a paren)" OFF)
set(NOT_CACHED "x")
set(C "" CACHE STRING "c")
set(D "(CACHE in a string)")
unset(E CACHE)
add_option(F)
message(STATUS "option(G")
)cm");
  EXPECT_EQ(names, (std::set<std::string>{"A", "B", "C"}));
}

TEST_F(FakeTrees, OrinMainlineWithMixedQuantizedKv) {
  BuildRequest r{.fa_kv = KvPair{"q8_0", "q4_0"}};
  auto p = plan_build(tree(mainline_), orin(), cuda_tools(12, "12.6"), r);
  ASSERT_TRUE(p.ok()) << p.error().message();
  const std::string m = mainline_.string();
  EXPECT_EQ(
      configure_line(*p),
      "cmake -S " + m + " -B " + in_build(m) +
          " -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "
          "-DGGML_NATIVE=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=87 "
          "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DGGML_CUDA_FA_ALL_QUANTS=ON -DGGML_METAL=OFF "
          "-DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON "
          "-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF "
          "-DLLAMA_OPENSSL=OFF");
  // 28 GiB available - 1 GiB kept = 27 GiB: six 4 GiB nvcc jobs, fewer than the 12 cores.
  EXPECT_EQ(words(p->build), "cmake --build " + in_build(m) + " --target llama-server -j 6");
  EXPECT_EQ(p->cuda_arch, "87");
  EXPECT_TRUE(p->jobs.memory_short);
  EXPECT_TRUE(p->warnings.empty()) << p->warnings.front();
  EXPECT_TRUE(mentions(p->reasons, "runs attention on the CPU"));
}

TEST_F(FakeTrees, MainlineSameTypeQuantizedKvIsBuiltByDefault) {
  for (const char* type : {"q8_0", "q4_0"}) {
    BuildRequest r{.fa_kv = KvPair{type, type}};
    auto p = plan_build(tree(mainline_), orin(), cuda_tools(12, "12.6"), r);
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(p->fa_all_quants) << type;
    EXPECT_TRUE(mentions(p->configure, "-DGGML_CUDA_FA_ALL_QUANTS=OFF"));
  }
  BuildRequest forced{.fa_all_quants = true};
  EXPECT_TRUE(plan_build(tree(mainline_), orin(), cuda_tools(12, "12.6"), forced)->fa_all_quants);
  BuildRequest q5{.fa_kv = KvPair{"q5_0", "q5_0"}};
  EXPECT_TRUE(plan_build(tree(mainline_), orin(), cuda_tools(12, "12.6"), q5)->fa_all_quants);
}

TEST_F(FakeTrees, OrinIkWithQuantizedKv) {
  // The field report's build: ik on Orin, q4_0 KV with -fa on.
  BuildRequest r{.fa_kv = KvPair{"q4_0", "q4_0"}};
  auto p = plan_build(tree(ik_), orin(), cuda_tools(12, "12.6"), r);
  ASSERT_TRUE(p.ok()) << p.error().message();
  const std::string ik = ik_.string();
  EXPECT_EQ(
      configure_line(*p),
      "cmake -S " + ik + " -B " + in_build(ik) +
          " -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "
          "-DGGML_NATIVE=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=87 "
          "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DGGML_CUDA_FA_ALL_QUANTS=ON -DGGML_METAL=OFF "
          "-DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON "
          "-DLLAMA_CURL=OFF");
  EXPECT_EQ(p->build.back(), "6");
  EXPECT_TRUE(mentions(p->reasons, "aborts on any other"));
}

TEST_F(FakeTrees, IkCudaNeedsACmakeThatKnowsCxx20ForNvcc) {
  Toolchain old = cuda_tools(12, "12.6");
  old.cmake_version = "3.22.1";  // Ubuntu 22.04, JetPack 6
  auto p = plan_build(tree(ik_), orin(), old, {});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(mentions(p->warnings, "needs CMake 3.25.2"));
  old.cmake_version = "3.25.2";
  EXPECT_TRUE(plan_build(tree(ik_), orin(), old, {})->warnings.empty());
  old.cmake_version = "3.22.1";
  EXPECT_TRUE(plan_build(tree(mainline_), orin(), old, {})->warnings.empty());  // mainline is C++17
}

TEST_F(FakeTrees, KvQuantOffLeavesTheFaKernelsAtTheirDefault) {
  auto p = plan_build(tree(ik_), orin(), cuda_tools(12, "12.6"), {});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->fa_all_quants);
  EXPECT_TRUE(mentions(p->configure, "-DGGML_CUDA_FA_ALL_QUANTS=OFF"));
  BuildRequest f16{.fa_kv = KvPair{"f16", "f16"}};
  EXPECT_FALSE(plan_build(tree(ik_), orin(), cuda_tools(12, "12.6"), f16)->fa_all_quants);
}

TEST_F(FakeTrees, ThorBuildsSm110WithCuda13) {
  auto p = plan_build(tree(mainline_), thor(), cuda_tools(14, "13.0"), {.fa_kv = KvPair{"q8_0", "q8_0"}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(mentions(p->configure, "-DCMAKE_CUDA_ARCHITECTURES=110"));
  EXPECT_TRUE(mentions(p->configure, "-DGGML_NATIVE=ON"));
  // 117 GiB fit 29 nvcc jobs: the 14 cores decide.
  EXPECT_EQ(p->build.back(), "14");
  EXPECT_FALSE(p->jobs.memory_short);

  auto old = plan_build(tree(mainline_), thor(), cuda_tools(14, "12.6"), {});
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message().find("needs CUDA 13.0"), std::string::npos) << old.error().message();
}

TEST_F(FakeTrees, X86WithRtx4070) {
  auto p = plan_build(tree(mainline_), rtx4070(), cuda_tools(16, "12.6"), {});
  ASSERT_TRUE(p.ok()) << p.error().message();
  const std::string m = mainline_.string();
  EXPECT_EQ(
      configure_line(*p),
      "cmake -S " + m + " -B " + in_build(m) +
          " -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "
          "-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
          "-DGGML_BMI2=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=89 "
          "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DGGML_CUDA_FA_ALL_QUANTS=OFF -DGGML_METAL=OFF "
          "-DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON "
          "-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF "
          "-DLLAMA_OPENSSL=OFF");
  EXPECT_EQ(p->build.back(), "6");  // (26 - 1) / 4
  EXPECT_TRUE(mentions(p->reasons, "AMX"));
}

TEST_F(FakeTrees, X86CpuOnlyIsThePinnedRecipe) {
  auto p = plan_build(tree(mainline_), x86_cpu(), {.ninja = true, .cores = 8}, {.build_dir = "/w/build"});
  ASSERT_TRUE(p.ok()) << p.error().message();
  // The options scripts/engine.sh passed to cmake for the pinned engine.
  const std::set<std::string> pinned = {"-DGGML_NATIVE=OFF",
                                        "-DGGML_SSE42=ON",
                                        "-DGGML_AVX=ON",
                                        "-DGGML_AVX2=ON",
                                        "-DGGML_FMA=ON",
                                        "-DGGML_F16C=ON",
                                        "-DGGML_BMI2=ON",
                                        "-DCMAKE_BUILD_TYPE=Release",
                                        "-DBUILD_SHARED_LIBS=OFF",
                                        "-DLLAMA_BUILD_TESTS=OFF",
                                        "-DLLAMA_BUILD_EXAMPLES=OFF",
                                        "-DLLAMA_BUILD_TOOLS=ON",
                                        "-DLLAMA_BUILD_SERVER=ON",
                                        "-DLLAMA_BUILD_APP=OFF",
                                        "-DLLAMA_BUILD_UI=OFF",
                                        "-DLLAMA_USE_PREBUILT_UI=OFF",
                                        "-DLLAMA_OPENSSL=OFF",
                                        "-DGGML_CUDA=OFF",
                                        "-DGGML_METAL=OFF",
                                        "-DGGML_VULKAN=OFF"};
  const std::set<std::string> got(p->configure.begin() + 7, p->configure.end());
  EXPECT_EQ(got, pinned);
  EXPECT_EQ(std::vector<std::string>(p->configure.begin(), p->configure.begin() + 7),
            (std::vector<std::string>{"cmake", "-S", mainline_.string(), "-B", "/w/build", "-G", "Ninja"}));
  EXPECT_EQ(words(p->build), "cmake --build /w/build --target llama-server -j 8");  // 11 g++ jobs fit
  EXPECT_FALSE(p->cuda);
}

TEST_F(FakeTrees, X86CpuOnlyIk) {
  auto p = plan_build(tree(ik_), x86_cpu(), {.ninja = true, .cores = 8}, {.fa_kv = KvPair{"q8_0", "q4_0"}});
  ASSERT_TRUE(p.ok());
  const std::string ik = ik_.string();
  EXPECT_EQ(configure_line(*p),
            "cmake -S " + ik + " -B " + in_build(ik) +
                " -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "
                "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_CUDA=OFF "
                "-DGGML_METAL=OFF -DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON "
                "-DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF");
  EXPECT_TRUE(mentions(p->reasons, "GGML_IQK_FA_ALL_QUANTS"));
}

TEST_F(FakeTrees, CudaChoices) {
  EXPECT_FALSE(
      plan_build(tree(mainline_), rtx4070(), cuda_tools(16, "12.6"), {.cuda = CudaChoice::kOff})->cuda);
  auto on = plan_build(tree(mainline_), x86_cpu(), {.cores = 8}, {.cuda = CudaChoice::kOn});
  ASSERT_FALSE(on.ok());
  EXPECT_NE(on.error().message().find("no NVIDIA GPU"), std::string::npos);
  // No nvcc found: the commands are still printed, with a warning saying how to get one.
  auto p = plan_build(tree(mainline_), orin(), {.cores = 12}, {});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(mentions(p->configure, "CMAKE_CUDA_COMPILER"));
  EXPECT_TRUE(mentions(p->warnings, "nvcc not found"));
  // Without Ninja, CMake's default generator.
  auto make = plan_build(tree(mainline_), x86_cpu(), {.ninja = false, .cores = 8}, {});
  EXPECT_FALSE(mentions(make->configure, "Ninja"));
}

TEST_F(FakeTrees, NativeCpuOnX86WarnsAboutAmx) {
  auto p = plan_build(tree(mainline_), x86_cpu(), {.cores = 8}, {.native_cpu = true});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(mentions(p->configure, "-DGGML_NATIVE=ON"));
  EXPECT_FALSE(mentions(p->configure, "-DGGML_AVX2=ON"));
  EXPECT_TRUE(mentions(p->warnings, "AMX"));
}

// The second field report's PC: Windows, 32 GiB, an RTX 3060 12 GB; kvgate.exe plans there.
device::Facts rtx3060() {
  device::Facts f;
  f.arch = "x86_64";
  f.mem_total = 32 * GiB;
  f.mem_available = 21 * GiB;
  f.gpus.push_back({.name = "NVIDIA GeForce RTX 3060",
                    .compute_capability = "8.6",
                    .memory_total = 12 * GiB,
                    .memory_free = 11 * GiB});
  return f;
}

Toolchain windows_tools(bool ninja) {
  Toolchain t = cuda_tools(16, "12.6");
  t.nvcc = R"(C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v12.6\bin\nvcc.exe)";
  t.ninja = ninja;
  t.windows = true;
  t.visual_studio = VisualStudio{.path = R"(C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools)",
                                 .version = "17.14.36310.24",
                                 .vcvars = R"(C:\VS\vcvars64.bat)"};
  return t;
}

TEST_F(FakeTrees, WindowsCudaBuildForAnRtx3060) {
  // ik with q4_0 KV, as the field report runs its 27B model.
  auto p = plan_build(tree(ik_), rtx3060(), windows_tools(true), {.fa_kv = KvPair{"q4_0", "q4_0"}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  const std::string ik = ik_.string();
  // No GGML_F16C (the tree declares it only for other compilers), nvcc's path with '/'.
  EXPECT_EQ(configure_line(*p),
            "cmake -S " + ik + " -B " + in_build(ik) +
                " -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "
                "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=86 "
                "-DCMAKE_CUDA_COMPILER=C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v12.6/bin/nvcc.exe "
                "-DGGML_CUDA_FA_ALL_QUANTS=ON -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF "
                "-DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF");
  EXPECT_TRUE(p->windows);
  EXPECT_EQ(p->vcvars, R"(C:\VS\vcvars64.bat)");
  EXPECT_EQ(p->binary, ik_ / "build-kvgate/bin/llama-server.exe");
  EXPECT_EQ(p->build.back(), "5");  // (21 - 1) / 4 nvcc jobs
  EXPECT_TRUE(mentions(p->reasons, "nvcc on Windows takes only MSVC"));
  EXPECT_TRUE(mentions(p->reasons, "cudart64_"));
  EXPECT_TRUE(p->warnings.empty()) << p->warnings[0];
}

TEST_F(FakeTrees, WindowsWithoutNinjaUsesTheVisualStudioGenerator) {
  auto p = plan_build(tree(mainline_), rtx3060(), windows_tools(false), {});
  ASSERT_TRUE(p.ok()) << p.error().message();
  const std::vector<std::string> head(p->configure.begin(), p->configure.begin() + 9);
  EXPECT_EQ(head, (std::vector<std::string>{"cmake", "-S", mainline_.string(), "-B",
                                            (mainline_ / "build-kvgate").string(), "-G",
                                            "Visual Studio 17 2022", "-A", "x64"}));
  EXPECT_FALSE(mentions(p->configure, "CMAKE_BUILD_TYPE"));  // multi-config: --config at build time
  EXPECT_FALSE(mentions(p->configure, "GGML_FMA"));
  EXPECT_FALSE(mentions(p->configure, "GGML_F16C"));
  EXPECT_TRUE(mentions(p->configure, "-DGGML_BMI2=ON"));
  EXPECT_EQ(words(p->build),
            "cmake --build " + in_build(mainline_.string()) + " --config Release --target llama-server -j 5");
  EXPECT_EQ(p->binary, mainline_ / "build-kvgate/bin/Release/llama-server.exe");
}

TEST_F(FakeTrees, WindowsNamesWhatIsMissing) {
  Toolchain bare = windows_tools(true);
  bare.visual_studio.reset();
  bare.nvcc.reset();
  auto p = plan_build(tree(mainline_), rtx3060(), bare, {});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->vcvars.empty());
  EXPECT_TRUE(mentions(p->warnings, "Build Tools for Visual Studio"));
  EXPECT_TRUE(mentions(p->warnings, "nvcc.exe not found"));

  bare.msvc_on_path = true;  // an "x64 Native Tools" prompt: its environment is already there
  p = plan_build(tree(mainline_), rtx3060(), bare, {});
  EXPECT_TRUE(p->vcvars.empty());
  EXPECT_FALSE(mentions(p->warnings, "Build Tools"));
  EXPECT_TRUE(mentions(p->reasons, "cl.exe already on PATH"));

  // A CPU build on Windows still uses MSVC and names the .exe; no runtime DLLs.
  auto cpu = plan_build(tree(mainline_), x86_cpu(), windows_tools(true), {});
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->vcvars, R"(C:\VS\vcvars64.bat)");
  EXPECT_EQ(cpu->binary.filename(), "llama-server.exe");
  EXPECT_FALSE(mentions(cpu->reasons, "cudart64_"));
}

TEST(ChooseJobs, FromFreeMemoryCappedByCores) {
  EXPECT_EQ(choose_jobs(28 * GiB, 12, true, {}).jobs, 6U);
  EXPECT_EQ(choose_jobs(28 * GiB, 4, true, {}).jobs, 4U);
  EXPECT_FALSE(choose_jobs(28 * GiB, 4, true, {}).memory_short);
  EXPECT_EQ(choose_jobs(28 * GiB, 12, false, {}).jobs, 12U);  // g++: 27 jobs fit
  EXPECT_EQ(choose_jobs(9 * GiB, 12, true, {}).jobs, 2U);
  EXPECT_EQ(choose_jobs(5 * GiB, 12, true, {}).jobs, 1U);
  const JobsChoice low = choose_jobs(3 * GiB, 12, true, {});
  EXPECT_EQ(low.jobs, 1U);
  EXPECT_TRUE(low.below_one_job);
  EXPECT_TRUE(choose_jobs(GiB / 2, 2, false, {}).below_one_job);
  EXPECT_EQ(choose_jobs(3 * GiB, 12, true, 4U).jobs, 4U);  // as asked
  EXPECT_EQ(choose_jobs(0, 6, true, {}).jobs, 6U);         // MemAvailable unknown
  EXPECT_EQ(choose_jobs(28 * GiB, 0, true, {}).jobs, 1U);
}

TEST_F(FakeTrees, ShortMemoryNamesTheRunningInstance) {
  device::Facts busy = orin();
  busy.mem_available = 7 * GiB;  // the 20 GB server still holds the rest
  const RunningInstance server{
      .pid = 4242,
      .engine_pid = 4243,
      .description = "kvgate up (pid 4242) serving /m/q.gguf on http://0.0.0.0:11434",
      .resident_bytes = 20 * GiB};
  auto p = plan_build(tree(ik_), busy, cuda_tools(12, "12.6"), {}, std::span(&server, 1));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->build.back(), "1");
  ASSERT_EQ(p->warnings.size(), 1U);
  EXPECT_NE(p->warnings[0].find("kvgate up (pid 4242)"), std::string::npos);
  EXPECT_NE(p->warnings[0].find("--stop-running"), std::string::npos);
  EXPECT_NE(p->warnings[0].find("kill -TERM 4242"), std::string::npos);
  EXPECT_NE(p->warnings[0].find("resident 20.00 GiB"), std::string::npos);

  busy.mem_available = 2 * GiB;
  auto q = plan_build(tree(ik_), busy, cuda_tools(12, "12.6"), {});
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(mentions(q->warnings, "one nvcc job needs about 4.00 GiB"));

  auto many = plan_build(tree(ik_), orin(), cuda_tools(12, "12.6"), {.jobs = 12U});
  EXPECT_EQ(many->build.back(), "12");
  EXPECT_TRUE(mentions(many->warnings, "--jobs 12 is more than the 6 job(s)"));
}

TEST(ParseKvPair, OneOrTwoTypesOfTheFork) {
  auto one = parse_kv_pair("q8_0", plan::Fork::kMainline);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->k, "q8_0");
  EXPECT_EQ(one->v, "q8_0");
  auto two = parse_kv_pair("q8_0,q4_0", plan::Fork::kMainline);
  EXPECT_EQ(two->v, "q4_0");
  EXPECT_TRUE(parse_kv_pair("q6_0", plan::Fork::kIk).ok());
  EXPECT_FALSE(parse_kv_pair("q6_0", plan::Fork::kMainline).ok());
  EXPECT_FALSE(parse_kv_pair("q8_0,", plan::Fork::kMainline).ok());
}

TEST(ShellCommand, QuotesWhatAShellWouldSplit) {
  EXPECT_EQ(util::shell_command({"cmake", "-S", "/a b", "-DX=it's"}), "cmake -S '/a b' '-DX=it'\\''s'");
  EXPECT_EQ(util::shell_command({"-DCMAKE_CUDA_ARCHITECTURES=86;89"}), "'-DCMAKE_CUDA_ARCHITECTURES=86;89'");
}

TEST_F(FakeTrees, BuildRecordNamesForkCommitAndDevice) {
  SourceTree t = tree(ik_);
  t.commit = "8337e4cd3";
  auto p = plan_build(t, orin(), cuda_tools(12, "12.6"), {});
  const auto j = build_record(t, orin(), *p, "version: 1 (8337e4cd3)\n", "2025-01-01T00:00:00Z");
  EXPECT_EQ(j["fork"], "ik");
  EXPECT_EQ(j["commit"], "8337e4cd3");
  EXPECT_EQ(j["binary"], "bin/llama-server");
  EXPECT_EQ(j["cuda_arch"], "87");
  EXPECT_EQ(j["device"]["jetson"]["jetpack"], "6.2");
  EXPECT_EQ(j["configure"], p->configure);
  EXPECT_EQ(j["version"], "version: 1 (8337e4cd3)\n");
}

// A folder `kvgate engine build --out` wrote is accepted wherever a server binary is named.
TEST(ResolveServer, AcceptsTheFolderOfARecordedBuild) {
  const fs::path out = fs::temp_directory_path() / ("kvgate_recorded_build_" + std::to_string(::getpid()));
  fs::remove_all(out);
  fs::create_directories(out / "bin");
#ifdef _WIN32
  const fs::path server = out / "bin" / "llama-server.exe";
#else
  const fs::path server = out / "bin" / "llama-server";
#endif
  std::ofstream(server) << "#!/bin/sh\n";
  fs::permissions(server, fs::perms::owner_all);
  auto not_recorded = resolve_server(out.string());
  ASSERT_FALSE(not_recorded.ok()) << "a folder without BUILD.json is not a build";
  EXPECT_NE(not_recorded.error().message().find("not a file"), std::string::npos)
      << not_recorded.error().message();
  std::ofstream(out / "BUILD.json") << "{}";
  auto recorded = resolve_server(out.string());
  ASSERT_TRUE(recorded.ok()) << recorded.error().message();
  EXPECT_EQ(*recorded, server);
  fs::remove_all(out);
}

}  // namespace
}  // namespace kvgate::engine
