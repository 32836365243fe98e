#include "engine/pinned.h"

#include <cstdlib>

#include <fmt/format.h>

#include "device/host.h"
#include "util/subprocess.h"

namespace kvgate::engine {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read-only use, no setenv in kvgate
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// The engine folder's platform part: the machine ("x86_64"), and "windows-" before it there.
std::string machine() {
  std::string m = device::host_machine();
  if (m.empty()) m = "unknown";
#ifdef _WIN32
  m = "windows-" + m;
#endif
  return m;
}

// The server binary's name: llama-server, or llama-server.exe on Windows.
constexpr const char* kServerName =
#ifdef _WIN32
    "llama-server.exe";
#else
    "llama-server";
#endif

}  // namespace

std::filesystem::path cache_root() {
  if (auto xdg = env("XDG_CACHE_HOME")) return std::filesystem::path(*xdg) / "kvgate";
  if (auto home = env("HOME")) return std::filesystem::path(*home) / ".cache" / "kvgate";
#ifdef _WIN32
  if (auto local = env("LOCALAPPDATA")) return std::filesystem::path(*local) / "kvgate" / "cache";
#endif
  return std::filesystem::temp_directory_path() / "kvgate-cache";
}

std::filesystem::path pinned_engine_dir() {
  return cache_root() / "engine" / fmt::format("llama.cpp-{}-{}", kPinnedCommit, machine());
}

Result<std::filesystem::path> resolve_server(const std::optional<std::string>& explicit_path) {
  std::filesystem::path path;
  std::string source;
  if (explicit_path && !explicit_path->empty()) {
    path = *explicit_path;
    source = "--server";
  } else if (auto from_env = env("KVGATE_SERVER")) {
    path = *from_env;
    source = "KVGATE_SERVER";
  } else {
    path = pinned_engine_dir() / "bin" / kServerName;
    if (!std::filesystem::exists(path)) {
      return Error(fmt::format("the pinned llama-server is not built ({} is missing): run scripts/setup.sh, "
                               "or point KVGATE_SERVER / --server at your own llama-server",
                               path.string()));
    }
    return path;
  }
  std::error_code ec;
  // A folder `kvgate engine build --out DIR` wrote (it holds BUILD.json) names its binary.
  if (std::filesystem::is_directory(path, ec) && std::filesystem::exists(path / "BUILD.json", ec)) {
    path = path / "bin" / kServerName;
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Error(fmt::format("{} names '{}', which is not a file", source, path.string()));
  }
  if (!util::is_executable_file(path.string())) {
    return Error(fmt::format("{} names '{}', which is not executable", source, path.string()));
  }
  return path;
}

Result<std::filesystem::path> vocab_file(std::string_view name) {
  std::filesystem::path dir = pinned_engine_dir() / "models";
  if (auto from_env = env("KVGATE_VOCAB_DIR")) dir = *from_env;
  auto path = dir / fmt::format("ggml-vocab-{}.gguf", name);
  if (!std::filesystem::exists(path)) {
    return Error(fmt::format("tokenizer file {} not found: run scripts/setup.sh (it keeps the release's "
                             "tokenizer GGUFs next to the engine), or pass --vocab FILE",
                             path.string()));
  }
  return path;
}

std::filesystem::path default_model_path() { return cache_root() / "models" / "kvgate-default-qwen3.gguf"; }

}  // namespace kvgate::engine
