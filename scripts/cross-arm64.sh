#!/usr/bin/env bash
# Cross-builds kvgate for arm64 (aarch64, as on NVIDIA Jetson) with GCC 11 — the compiler
# JetPack 6 / Ubuntu 22.04 ship — and runs the unit tests and `kvgate synth/inspect/plan`
# under qemu-user emulation. The GGUF reader, hashing and planner then run with the
# target's char signedness, alignment rules and libraries instead of the build machine's.
#
# Debian (x86-64) only: installs the cross compiler, qemu-user and the `:arm64` builds of the
# libraries kvgate links (multiarch), then builds into build-arm64/.
# Extra arguments go to ctest (e.g. -R Gguf).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[arm64] %s\n' "$*" >&2; }

if [[ "$(uname -m)" != x86_64 ]]; then
  log "this machine is $(uname -m): the cross build is for x86-64 hosts (build natively with scripts/test.sh)"
  exit 0
fi

readonly GCC_VERSION="${KVGATE_CROSS_GCC_VERSION:-11}"
packages=(
  "g++-$GCC_VERSION-aarch64-linux-gnu" qemu-user
  libcpp-httplib-dev:arm64 libfmt-dev:arm64 libspdlog-dev:arm64 libsqlite3-dev:arm64 libxxhash-dev:arm64 libzstd-dev:arm64 zlib1g-dev:arm64
  libgtest-dev:arm64 libgmock-dev:arm64
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    log "enabling the arm64 package architecture (dpkg --add-architecture arm64)"
    "${sudo_cmd[@]}" dpkg --add-architecture arm64
  fi
  log "installing: ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -q >/dev/null
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
log "configuring build-arm64/ (aarch64-linux-gnu-g++-$GCC_VERSION)"
cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DKVGATE_CROSS_GCC_VERSION="$GCC_VERSION" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKVGATE_BUILD_TESTS=ON "${launcher[@]}" >/dev/null

# The unit-test binaries (the end-to-end ones start the x86-64 engine) and the CLI.
mapfile -t unit_targets < <(ninja -C build-arm64 -t targets all | sed -n 's/^\([A-Za-z0-9_]*_test\): .*/\1/p' |
                              grep -v '_e2e_test$' | sort -u)
log "building kvgate and ${#unit_targets[@]} unit-test binaries for arm64"
start=$SECONDS
cmake --build build-arm64 -j "$(nproc)" --target kvgate "${unit_targets[@]}"
log "built in $((SECONDS - start)) s"

log "unit tests under qemu-aarch64"
start=$SECONDS
ctest --test-dir build-arm64 --output-on-failure -j "$(nproc)" -L unit "$@"
log "unit tests passed in $((SECONDS - start)) s"

# The CLI on a model it writes itself, all under emulation: synth → inspect → plan, and the
# figures must equal the native build's (same file bytes, same plan).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kvgate_arm64=(qemu-aarch64 build-arm64/src/cli/kvgate)
# The tokenizer GGUFs synth copies are data: the x86-64 engine's copies serve the arm64 binary.
if [[ -z "${KVGATE_VOCAB_DIR:-}" ]]; then
  for d in "${XDG_CACHE_HOME:-$HOME/.cache}"/kvgate/engine/llama.cpp-*-x86_64/models; do
    [[ -d "$d" ]] && export KVGATE_VOCAB_DIR="$d"
  done
fi
for preset in tiny-llama tiny-qwen3 tiny-qwen35 tiny-gemma3; do
  "${kvgate_arm64[@]}" synth --preset "$preset" --out "$tmp/arm64.gguf" >/dev/null
  "${kvgate_arm64[@]}" inspect "$tmp/arm64.gguf" >/dev/null
  "${kvgate_arm64[@]}" plan "$tmp/arm64.gguf" --ctx 8192 --np 2 --json >"$tmp/plan-arm64.json"
  [[ -x build/src/cli/kvgate ]] || continue
  build/src/cli/kvgate synth --preset "$preset" --out "$tmp/native.gguf" >/dev/null
  cmp "$tmp/arm64.gguf" "$tmp/native.gguf" ||
    { log "$preset: the arm64 build wrote a different GGUF than the native one"; exit 1; }
  build/src/cli/kvgate plan "$tmp/native.gguf" --ctx 8192 --np 2 --json >"$tmp/plan-native.json"
  sed -i "s#$tmp/native.gguf#MODEL#g" "$tmp/plan-native.json"
  sed -i "s#$tmp/arm64.gguf#MODEL#g" "$tmp/plan-arm64.json"
  diff "$tmp/plan-native.json" "$tmp/plan-arm64.json" >&2 || { log "$preset: the arm64 plan differs from the native one"; exit 1; }
done
[[ -x build/src/cli/kvgate ]] &&
  log "synth/inspect/plan under emulation: the same GGUF bytes and the same plan as the native build (4 architectures)"
log "arm64: all passed"
