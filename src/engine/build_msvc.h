// What `kvgate engine build` needs to know on Windows, where nvcc accepts only MSVC (cl.exe)
// as its host compiler: so a CUDA build of llama.cpp or ik_llama.cpp is compiled by Visual
// Studio's C++ tools, in the environment its vcvars64.bat sets up (the "x64 Native Tools"
// prompt), as both forks' own Windows CUDA builds are.
//
// Visual Studio is found with vswhere.exe (installed with every Visual Studio since 2017, at
// a fixed place) and its `-format json` output; the environment is the `set` listing of a
// cmd.exe that has called vcvars64.bat. Both readers are pure functions of that text, so they
// are tested on any platform; only the CLI runs the programs.
//
// A llama-server.exe built with CUDA loads the CUDA runtime and cuBLAS DLLs at start
// (cudart64_*.dll, cublas64_*.dll, cublasLt64_*.dll): they lie beside nvcc.exe (CUDA 12:
// bin\, CUDA 13: bin\x64\) and are copied next to the binary, so OUT\bin runs on its own.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::engine {

struct VisualStudio {
  std::string path;     // installationPath, "C:\Program Files\Microsoft Visual Studio\2022\BuildTools"
  std::string version;  // installationVersion, "17.14.36310.24"
  std::string vcvars;   // the environment script, <path>\VC\Auxiliary\Build\vcvars64.bat

  // CMake's generator for this version, "Visual Studio 17 2022"; empty when unknown.
  std::string generator() const;
  // The Ninja that the "C++ CMake tools" component installs with it.
  std::string bundled_ninja() const;
};

// Where vswhere.exe lives (under %ProgramFiles(x86)%) and the arguments that list the newest
// Visual Studio with the x64 C++ tools.
std::vector<std::string> vswhere_command(std::string_view program_files_x86);

// The first instance of `vswhere -format json`; nullopt when the text lists none or is not
// that JSON.
std::optional<VisualStudio> parse_vswhere(std::string_view json_text);

// The environment a `set` listing shows: NAME=VALUE per line (CR LF or LF); lines without
// '=' past the first character are skipped.
std::map<std::string, std::string> parse_environment(std::string_view set_output);

// The value of `name` in `env`, compared as Windows does (ignoring case: "Path" is PATH).
std::optional<std::string> environment_value(const std::map<std::string, std::string>& env,
                                             std::string_view name);

// The CUDA runtime DLLs next to `nvcc` (its folder and its x64\ subfolder), sorted.
std::vector<std::filesystem::path> cuda_runtime_dlls(const std::filesystem::path& nvcc);

}  // namespace kvgate::engine
