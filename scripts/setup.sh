#!/usr/bin/env bash
# Sets up everything kvgate needs and builds it:
#   1. the distribution's packages (compilers, CMake, the libraries kvgate links; for the
#      test suite also clang's sanitizer runtime, GoogleTest and Node.js),
#   2. kvgate itself (CMake preset "default" → build/),
#   3. the pinned llama-server engine, built once into ~/.cache/kvgate through
#      `kvgate engine build` (scripts/engine.sh),
#   4. the built-in default model (a small synthesized qwen3-shaped GGUF) in the cache,
#   5. for the test suite: the npm packages the tests use as independent clients (tests/npm);
#      for the second tier also the pinned agent CLIs the agents' e2e test runs through
#      kvgate (tests/agents, ~930 MB).
#
#   scripts/setup.sh           what the first tier needs (scripts/test.sh): kvgate, its
#                              default targets (the first tier's tests), the npm clients
#   scripts/setup.sh --long    everything the second tier needs (scripts/test-long.sh): all
#                              targets and the agent CLIs
#   scripts/setup.sh --serve   only what serving needs: the `kvgate` binary, no tests
#
# Debian 12 is what it is tested on. Ubuntu 22.04 / 24.04 (and JetPack 6 / 7 on Jetson,
# which are those releases) use the same package names except where noted in
# ubuntu_packages below.
# Safe to re-run: every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

mode=all
long=0
case "${1:-}" in
  --serve) mode=serve ;;
  --long) long=1 ;;
  "") ;;
  *) log "unknown argument '$1' (use --serve, --long or nothing)"; exit 2 ;;
esac
PHASE_TAG=setup
source scripts/phases.sh

# The distribution and release, from /etc/os-release; a Jetson says so in /etc/nv_tegra_release.
os_id=debian os_version=12
if [[ -r /etc/os-release ]]; then
  os_id=$(. /etc/os-release && echo "${ID:-debian}")
  os_version=$(. /etc/os-release && echo "${VERSION_ID:-}")
fi
jetson=""
[[ -r /etc/nv_tegra_release ]] && jetson=$(head -1 /etc/nv_tegra_release | sed 's/^# *//')

serve_packages=(
  build-essential g++ cmake ninja-build pkg-config git ca-certificates
  libcpp-httplib-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libsqlite3-dev libxxhash-dev libzstd-dev zlib1g-dev
  libjs-chart.js procps
)
test_packages=(clang clang-format libgtest-dev libgmock-dev sqlite3 systemd psmisc ccache python3 zstd curl)

# clang's sanitizer runtime has a versioned name that differs by release.
case "$os_id-$os_version" in
  ubuntu-22.04) test_packages+=(libclang-common-14-dev) ;;  # jammy: clang 14, runtime in libclang-common
  ubuntu-24.04) test_packages+=(libclang-rt-18-dev) ;;      # noble: clang 18
  *) test_packages+=(libclang-rt-14-dev) ;;                 # Debian 12: clang 14
esac
# The status page's browser test: Debian's chromium (Ubuntu's is a snap, which containers
# lack: there the test skips, saying so).
[[ "$os_id" != ubuntu ]] && test_packages+=(chromium)
[[ "$os_id" == debian || "$os_id" == ubuntu ]] ||
  log "warning: $os_id $os_version is not Debian or Ubuntu; trying Debian 12's package names"

packages=("${serve_packages[@]}")
[[ "$mode" == all ]] && packages+=("${test_packages[@]}")
# npm fetches the pinned engine's source (and, for the tests, the client packages).
command -v npm >/dev/null || packages+=(nodejs npm)

phase "packages"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing packages ($os_id $os_version${jetson:+, Jetson $jetson}): ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q >/dev/null
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

source scripts/build-env.sh
if [[ "$mode" == all ]]; then
  phase "building kvgate and its tests (build/)"
  cmake --preset default -DKVGATE_BUILD_TESTS=ON >/dev/null
  cmake --build build -j "$(nproc)"
  # The second tier's own binaries are not in the default build (EXCLUDE_FROM_ALL).
  if [[ $long == 1 ]]; then cmake --build build -j "$(nproc)" --target tier2_tests; fi
else
  phase "building kvgate"
  log "building kvgate (build/, the kvgate binary only)"
  cmake --preset default -DKVGATE_BUILD_TESTS=OFF >/dev/null
  cmake --build build -j "$(nproc)" --target kvgate
fi

phase "engine"
if [[ -z "${KVGATE_SERVER:-}" ]]; then
  engine_dir=$(KVGATE_BIN="$PWD/build/src/cli/kvgate" scripts/engine.sh)
  log "engine: $engine_dir/bin/llama-server"
else
  log "engine: KVGATE_SERVER=$KVGATE_SERVER (the pinned engine is not built)"
fi

# Independent clients used by the tests (the npm GGUF parser, the official OpenAI client),
# pinned by tests/npm/package-lock.json.
phase "npm clients and the default model"
if [[ "$mode" == all && ( ! -d tests/npm/node_modules || tests/npm/package-lock.json -nt tests/npm/node_modules ) ]]; then
  log "installing test clients from the npm registry (tests/npm)"
  npm ci --prefix tests/npm --no-audit --no-fund --loglevel=error >&2
fi

# The pinned agent CLIs (Claude Code, Codex, Qwen Code) for src/cli/agents_e2e_test.cc.
# npm install, not npm ci: see tests/fixtures/agents/README.md ("Installing the CLIs").
if [[ $long == 1 && "${KVGATE_SKIP_AGENTS:-0}" != 1 &&
      ( ! -d tests/agents/node_modules || tests/agents/package-lock.json -nt tests/agents/node_modules ) ]]; then
  log "installing the pinned agent CLIs from the npm registry (tests/agents, ~930 MB)"
  npm install --prefix tests/agents --no-audit --no-fund --loglevel=error >&2
  touch tests/agents/node_modules
fi

build/src/cli/kvgate synth --default-model >&2
log "ready: build/src/cli/kvgate"
