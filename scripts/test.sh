#!/usr/bin/env bash
# Runs the whole test suite: sets up (scripts/setup.sh), then
#   1. every test in the default build, including the end-to-end tests that run the real
#      pinned llama-server on synthesized models;
#   2. the parser and server unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer
#      (CMake preset "asan", clang), skipped with KVGATE_SKIP_ASAN=1;
#   3. on x86-64: the arm64 cross build with GCC 11 and its unit tests under qemu-user
#      (scripts/cross-arm64.sh), skipped with KVGATE_SKIP_ARM64=1.
# Extra arguments are passed to ctest (e.g. -R Gguf).
set -euo pipefail
cd "$(dirname "$0")/.."
# Compiled objects are cached outside the checkout by ccache (installed by setup.sh), with
# paths taken relative to the checkout: a fresh clone of code built before, in any folder,
# compiles only what changed. CMake reads the launcher when it first configures a build dir.
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
fi
scripts/setup.sh

jobs=$(nproc)

# A real ik_llama.cpp build beside the checkout (../shared/engines/) is tested against too;
# without one (and without KVGATE_IK_SERVER) the ik cases skip and say why.
if [[ -z "${KVGATE_IK_SERVER:-}" ]]; then
  for ik in ../shared/engines/ik_llama.cpp-*-"$(uname -m)"/bin/llama-server; do
    [[ -x "$ik" ]] && export KVGATE_IK_SERVER="$(cd "$(dirname "$ik")" && pwd)/llama-server"
  done
fi
log() { printf '[test] %s\n' "$*" >&2; }

log "default build: all tests"
ctest --test-dir build --output-on-failure -j "$jobs" "$@"

if [[ "${KVGATE_SKIP_ASAN:-0}" != 1 ]]; then
  log "asan build: unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake --preset asan >/dev/null
  # Only the unit-test binaries (the end-to-end ones already ran above).
  mapfile -t unit_targets < <(ninja -C build-asan -t targets all | sed -n 's/^\([A-Za-z0-9_]*_test\): .*/\1/p' | grep -v '^cmake_' |
                                grep -v '_e2e_test$' | sort -u)
  cmake --build build-asan -j "$jobs" --target "${unit_targets[@]}"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -L unit "$@"
fi
if [[ "${KVGATE_SKIP_ARM64:-0}" != 1 ]]; then
  log "arm64 cross build (GCC 11): unit tests under qemu-aarch64"
  scripts/cross-arm64.sh
fi
log "all tests passed"
