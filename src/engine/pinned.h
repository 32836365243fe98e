// Where kvgate finds its engine and the files that come with it.
//
// The pinned engine is the llama.cpp release shipped by the npm package
// node-llama-cpp@3.21.1 (tag v0.4.0, commit 80fb11a), built CPU-only by scripts/engine.sh
// into  ${XDG_CACHE_HOME:-$HOME/.cache}/kvgate/engine/llama.cpp-80fb11a-<machine>/ :
//   bin/llama-server   the server
//   models/            the release's tokenizer-only GGUF files (ggml-vocab-*.gguf)
// KVGATE_SERVER=/path/to/llama-server (or a command's --server) selects another build.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "util/result.h"

namespace kvgate::engine {

inline constexpr std::string_view kPinnedCommit = "80fb11a";
inline constexpr std::string_view kPinnedNpmPackage = "node-llama-cpp@3.21.1";

// ${XDG_CACHE_HOME:-$HOME/.cache}/kvgate
std::filesystem::path cache_root();
// The pinned engine's cache directory (whether or not it is built).
std::filesystem::path pinned_engine_dir();

// The server binary to use: `explicit_path` if given, else $KVGATE_SERVER, else the pinned
// build. Either may name a folder `kvgate engine build --out` wrote (it holds BUILD.json):
// its bin/llama-server. Error (saying how to build or select one) if the result is not an
// executable file.
Result<std::filesystem::path> resolve_server(const std::optional<std::string>& explicit_path = std::nullopt);

// A tokenizer-only GGUF of the pinned release, e.g. "qwen2" → models/ggml-vocab-qwen2.gguf.
// $KVGATE_VOCAB_DIR overrides the directory.
Result<std::filesystem::path> vocab_file(std::string_view name = "qwen2");

// The built-in default model (written by `kvgate synth --default-model`).
std::filesystem::path default_model_path();

}  // namespace kvgate::engine
