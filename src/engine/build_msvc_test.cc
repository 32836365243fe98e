// The readers of vswhere's and cmd.exe's output and the CUDA runtime search, on text and
// folders shaped as a Windows machine has them.
#include "engine/build_msvc.h"

#include <algorithm>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

// `vswhere -latest -products * -requires ...VC.Tools.x86.x64 -format json -utf8` with Build Tools
// 2022 installed (fields as vswhere prints them; the catalog object abridged).
constexpr const char* kVswhere = R"([
  {
    "instanceId": "8f3ad0f2",
    "installDate": "2025-03-14T09:12:40Z",
    "installationName": "VisualStudio/17.14.13+36310.24",
    "installationPath": "C:\\Program Files (x86)\\Microsoft Visual Studio\\2022\\BuildTools",
    "installationVersion": "17.14.36310.24",
    "productId": "Microsoft.VisualStudio.Product.BuildTools",
    "isComplete": true,
    "displayName": "Visual Studio Build Tools 2022",
    "catalog": {"productLineVersion": "2022"}
  }
]
)";

TEST(ParseVswhere, TheNewestInstanceAndItsScript) {
  const auto vs = parse_vswhere(kVswhere);
  ASSERT_TRUE(vs.has_value());
  EXPECT_EQ(vs->path, R"(C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools)");
  EXPECT_EQ(vs->version, "17.14.36310.24");
  EXPECT_EQ(
      vs->vcvars,
      R"(C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools\VC\Auxiliary\Build\vcvars64.bat)");
  EXPECT_EQ(vs->generator(), "Visual Studio 17 2022");
  EXPECT_EQ(
      vs->bundled_ninja(),
      R"(C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools\Common7\IDE\CommonExtensions\Microsoft\CMake\Ninja\ninja.exe)");
}

TEST(ParseVswhere, NoneOrNotItsJson) {
  EXPECT_FALSE(parse_vswhere("[]").has_value());  // nothing with the C++ tools
  EXPECT_FALSE(parse_vswhere("").has_value());
  EXPECT_FALSE(parse_vswhere("Visual Studio Locator version 3.1.7").has_value());
  EXPECT_FALSE(parse_vswhere(R"([{"installationPath": 3}])").has_value());
  EXPECT_FALSE(parse_vswhere(R"([{"installationPath": ""}])").has_value());
  EXPECT_EQ(VisualStudio{.version = "16.11.5"}.generator(), "Visual Studio 16 2019");
  EXPECT_EQ(VisualStudio{.version = "18.0.1"}.generator(), "Visual Studio 18 2026");
  EXPECT_EQ(VisualStudio{.version = "15.9"}.generator(), "");  // 2017: no C++20 for ik, not offered
  EXPECT_EQ(VisualStudio{}.generator(), "");
}

TEST(ParseVswhere, CommandIsUnderProgramFilesX86) {
  const auto argv = vswhere_command(R"(D:\Apps (x86))");
  EXPECT_EQ(argv[0], R"(D:\Apps (x86)\Microsoft Visual Studio\Installer\vswhere.exe)");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "json"), argv.end());
}

TEST(ParseEnvironment, ASetListing) {
  const auto env = parse_environment(
      "=C:=C:\\src\r\n"
      "INCLUDE=C:\\VS\\include;C:\\Kits\\10\\include\r\n"
      "Path=C:\\VS\\bin;C:\\Windows\\system32\r\n"
      "ODD=a=b\n"
      "no equals sign\r\n"
      "EMPTY=\r\n");
  EXPECT_EQ(env.size(), 4U);
  EXPECT_EQ(env.at("INCLUDE"), "C:\\VS\\include;C:\\Kits\\10\\include");
  EXPECT_EQ(env.at("ODD"), "a=b");
  EXPECT_EQ(env.at("EMPTY"), "");
  EXPECT_EQ(environment_value(env, "PATH"), "C:\\VS\\bin;C:\\Windows\\system32");  // "Path" is PATH
  EXPECT_EQ(environment_value(env, "path"), "C:\\VS\\bin;C:\\Windows\\system32");
  EXPECT_FALSE(environment_value(env, "LIB").has_value());
}

TEST(CudaRuntimeDlls, BesideNvccAndInItsX64Folder) {
  const fs::path root = fs::temp_directory_path() / ("kvgate_cuda_dlls_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path bin = root / "CUDA" / "v13.0" / "bin";
  fs::create_directories(bin / "x64");
  for (const fs::path& f : {bin / "nvcc.exe", bin / "cudart64_13.dll", bin / "cufft64_12.dll",
                            bin / "cublas64.txt", bin / "x64" / "cublas64_13.dll",
                            bin / "x64" / "cublasLt64_13.dll", bin / "x64" / "CUDART64_13.DLL"}) {
    std::ofstream(f) << "x";
  }
  const auto dlls = cuda_runtime_dlls(bin / "nvcc.exe");
  std::vector<std::string> names;
  for (const auto& d : dlls) names.push_back(d.lexically_relative(bin).generic_string());
  EXPECT_EQ(names, (std::vector<std::string>{"cudart64_13.dll", "x64/CUDART64_13.DLL", "x64/cublas64_13.dll",
                                             "x64/cublasLt64_13.dll"}));
  EXPECT_TRUE(cuda_runtime_dlls(root / "none" / "nvcc.exe").empty());
  fs::remove_all(root);
}

}  // namespace
}  // namespace kvgate::engine
