#!/usr/bin/env bash
# Builds the pinned llama-server (CPU only) into a cache outside the checkout and
# reuses it when present. Prints the engine directory on stdout as its last line.
#
# The build runs through `kvgate engine build` (docs/OPERATIONS.md, "Building the engine for
# your device"), so the pinned engine and a user's own build share one recipe. It needs the
# kvgate binary: KVGATE_BIN=/path/to/kvgate scripts/engine.sh (default: build/src/cli/kvgate
# of this checkout, then kvgate on PATH). A cached engine needs no kvgate.
# KVGATE_BUILD_JOBS=N sets -j (default: kvgate's choice from free memory and cores).
#
# Pin: the llama.cpp release shipped by the npm package node-llama-cpp@3.21.1 as
# llama/gitRelease.bundle (tag v0.4.0, commit 80fb11a).
#
# Layout of the cache (keyed by commit and machine):
#   ${XDG_CACHE_HOME:-$HOME/.cache}/kvgate/engine/llama.cpp-<commit>-<arch>/
#     bin/llama-server        the engine
#     models/ggml-vocab-*.gguf tokenizer-only models used by `kvgate synth --vocab`
#     BUILD.json, logs/       kvgate engine build's record and its configure/build logs
#     ENGINE_OK               written last ("recipe N"): the build is complete and current
set -euo pipefail

readonly NPM_PACKAGE="node-llama-cpp@3.21.1"
readonly COMMIT_SHORT="80fb11a"
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
kvgate="${KVGATE_BIN:-}"
if [[ -z "$kvgate" ]]; then
  checkout_kvgate="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/src/cli/kvgate"
  if [[ -x "$checkout_kvgate" ]]; then kvgate="$checkout_kvgate"; else kvgate="$(command -v kvgate || true)"; fi
fi
if [[ -z "$kvgate" || ! -x "$kvgate" ]]; then
  log "kvgate not found${KVGATE_BIN:+ at '$KVGATE_BIN'}: build it first (cmake --preset default && cmake --build build --target kvgate), then KVGATE_BIN=build/src/cli/kvgate $0"
  exit 1
fi

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

# The pinned engine is the CPU build (--cuda off). kvgate engine build chooses the rest: on
# x86-64 AVX2/FMA/F16C/BMI2 (x86-64-v3) with GGML_NATIVE=OFF instead of -march=native, since
# native builds on CPUs with AMX enable ggml's AMX matmul path, which crashes this release
# (SIGSEGV in ggml_backend_amx_mul_mat) on q8_0 weights, and a fixed target keeps the cached
# binary valid on any AVX2 machine; elsewhere (ARM) the native flags. Release, static, the
# server only (no tests, examples, web UI, HTTPS). It copies bin/llama-server into
# $engine_dir and writes BUILD.json and logs/ there.
jobs_arg=()
if [[ -n "${KVGATE_BUILD_JOBS:-}" ]]; then jobs_arg=(--jobs "$KVGATE_BUILD_JOBS"); fi
log 'building llama-server (CPU, Release) using kvgate engine build; the first build takes 10-25 minutes'
"$kvgate" engine build "$work/src" --out "$engine_dir" --build-dir "$work/build" --cuda off "${jobs_arg[@]}" >&2 \
  || { log "kvgate engine build failed (logs: $engine_dir/logs/)"; exit 1; }

mkdir -p "$engine_dir/models"
cp "$work/src/models/"ggml-vocab-*.gguf "$engine_dir/models/"
git -C "$work/src" rev-parse HEAD >"$engine_dir/COMMIT"
"$engine_dir/bin/llama-server" --version >"$engine_dir/VERSION" 2>&1 || true
echo "recipe $RECIPE" >"$engine_dir/ENGINE_OK"
rm -rf "$work"
log "built: $engine_dir/bin/llama-server"
echo "$engine_dir"
