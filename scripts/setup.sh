#!/usr/bin/env bash
# Sets up everything kvgate needs on a Debian 12 machine and builds it:
#   1. Debian packages (compilers, CMake, the libraries kvgate links, Node.js for tests),
#   2. the pinned llama-server engine, built once into ~/.cache/kvgate (scripts/engine.sh),
#   3. kvgate itself (CMake preset "default" → build/),
#   4. the built-in default model (a small synthesized qwen3-shaped GGUF) in the cache,
#   5. the npm packages the tests use as independent clients (tests/npm).
# Safe to re-run: every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

packages=(
  build-essential g++ clang libclang-rt-14-dev cmake ninja-build pkg-config git ca-certificates
  libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libsqlite3-dev sqlite3 libxxhash-dev
  systemd procps psmisc
)
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q >/dev/null
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ -z "${KVGATE_SERVER:-}" ]]; then
  engine_dir=$(scripts/engine.sh)
  log "engine: $engine_dir/bin/llama-server"
else
  log "engine: KVGATE_SERVER=$KVGATE_SERVER (the pinned engine is not built)"
fi

# Independent clients used by the tests (the npm GGUF parser, the official OpenAI client),
# pinned by tests/npm/package-lock.json.
if [[ ! -d tests/npm/node_modules || tests/npm/package-lock.json -nt tests/npm/node_modules ]]; then
  log "installing test clients from the npm registry (tests/npm)"
  npm ci --prefix tests/npm --no-audit --no-fund --loglevel=error >&2
fi

log "building kvgate (build/)"
cmake --preset default >/dev/null
cmake --build build -j "$(nproc)"

build/src/cli/kvgate synth --default-model >&2
log "ready: build/src/cli/kvgate"
