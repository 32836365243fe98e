#!/usr/bin/env bash
# Builds the pinned llama-server (CPU only) into a cache outside the checkout and
# reuses it when present. Prints the engine directory on stdout as its last line.
#
# Pin: the llama.cpp release shipped by the npm package node-llama-cpp@3.21.1 as
# llama/gitRelease.bundle (tag v0.4.0, commit 80fb11a).
#
# Layout of the cache (keyed by commit and machine):
#   ${XDG_CACHE_HOME:-$HOME/.cache}/kvgate/engine/llama.cpp-<commit>-<arch>/
#     bin/llama-server        the engine
#     models/ggml-vocab-*.gguf tokenizer-only models used by `kvgate synth --vocab`
#     ENGINE_OK               written last ("recipe N"): the build is complete and current
set -euo pipefail

readonly NPM_PACKAGE="node-llama-cpp@3.21.1"
readonly COMMIT_SHORT="80fb11a"
readonly JOBS="${KVGATE_BUILD_JOBS:-$(nproc)}"
# Bump when the build recipe changes; a cached build with another recipe is rebuilt.
readonly RECIPE="2"

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/kvgate"
engine_dir="$cache_root/engine/llama.cpp-$COMMIT_SHORT-$(uname -m)"

log() { printf '[engine] %s\n' "$*" >&2; }

if [[ -x "$engine_dir/bin/llama-server" && "$(cat "$engine_dir/ENGINE_OK" 2>/dev/null)" == "recipe $RECIPE" ]]; then
  log "cached: $engine_dir/bin/llama-server"
  echo "$engine_dir"
  exit 0
fi

for tool in npm git cmake c++ tar; do
  command -v "$tool" >/dev/null || { log "missing '$tool': run scripts/setup.sh (installs Debian packages) first"; exit 1; }
done

work="$cache_root/build/llama.cpp-$COMMIT_SHORT"
rm -rf "$work" "$engine_dir"
mkdir -p "$work" "$engine_dir"

log "fetching $NPM_PACKAGE from the npm registry"
(cd "$work" && npm pack --silent "$NPM_PACKAGE" >/dev/null)
tar -xzf "$work"/node-llama-cpp-*.tgz -C "$work" package/llama/gitRelease.bundle

log "cloning llama/gitRelease.bundle"
git clone --quiet "$work/package/llama/gitRelease.bundle" "$work/src" 2>/dev/null
head=$(git -C "$work/src" rev-parse HEAD)
if [[ "$head" != "$COMMIT_SHORT"* ]]; then
  log "bundle is at $head, expected $COMMIT_SHORT: the npm package changed; refusing to build"
  exit 1
fi

# CPU flags. On x86-64 the build targets AVX2/FMA/F16C (x86-64-v3) instead of -march=native:
# native builds on CPUs with AMX enable ggml's AMX matmul path, which crashes this release
# (SIGSEGV in ggml_backend_amx_mul_mat) on q8_0 weights, and a fixed target keeps the
# cached binary valid on any AVX2 machine. Elsewhere (ARM) the native flags are used.
cpu_flags=()
if [[ "$(uname -m)" == x86_64 ]]; then
  cpu_flags=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
fi

log "building llama-server (CPU, Release) with $JOBS jobs; the first build takes 10-25 minutes"
cmake -S "$work/src" -B "$work/build" -G Ninja "${cpu_flags[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
  >"$work/configure.log" 2>&1 || { tail -30 "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j "$JOBS" >"$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log" >&2; exit 1; }

mkdir -p "$engine_dir/bin" "$engine_dir/models"
cp "$work/build/bin/llama-server" "$engine_dir/bin/llama-server"
cp "$work/src/models/"ggml-vocab-*.gguf "$engine_dir/models/"
git -C "$work/src" rev-parse HEAD >"$engine_dir/COMMIT"
"$engine_dir/bin/llama-server" --version >"$engine_dir/VERSION" 2>&1 || true
echo "recipe $RECIPE" >"$engine_dir/ENGINE_OK"
rm -rf "$work"
log "built: $engine_dir/bin/llama-server"
echo "$engine_dir"
