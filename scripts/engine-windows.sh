#!/usr/bin/env bash
# Cross-builds the pinned llama-server for x86-64 Windows (CPU only) with Debian's mingw-w64
# into a cache outside the checkout, and reuses it when present. Prints the engine directory
# on stdout as its last line.
#
#   scripts/engine-windows.sh            build (or reuse) bin/llama-server.exe
#   scripts/engine-windows.sh --check    the same, then serve one completion under wine
#
# Pin: the same llama.cpp release as scripts/engine.sh, the npm package node-llama-cpp@3.21.1's
# llama/gitRelease.bundle (tag v0.4.0, commit 80fb11a). The compilers and wine come from
# cmake/x86_64-w64-mingw32.cmake (the -posix mingw-w64 compilers, static libgcc/libstdc++);
# scripts/windows-deps.sh installs them. The check needs the native kvgate for `kvgate synth`
# (KVGATE_BIN, default build/src/cli/kvgate of this checkout, then kvgate on PATH), curl and jq.
# KVGATE_BUILD_JOBS=N sets -j (default: nproc). KVGATE_WINE_TIMEOUT=S bounds the check's
# wait for /health (default 300 s: wine creates its prefix on the first start).
#
# Layout of the cache:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/kvgate/
#     build/llama.cpp-<commit>-windows/      source and build tree (removed after a good build)
#     engine/llama.cpp-<commit>-windows-x86_64/
#       bin/llama-server.exe      the engine: one static .exe, only Windows system DLLs
#       models/ggml-vocab-*.gguf  tokenizer-only models used by `kvgate synth --vocab`
#       BUILD.json, logs/         commit, toolchain, cmake flags, imported DLLs; configure/build logs
#       COMMIT, VERSION           the full commit; `llama-server.exe --version` under wine
#       ENGINE_OK                 written last ("recipe N"): the build is complete and current
#     wine/                       the WINEPREFIX the check (and VERSION) run in, not ~/.wine
set -euo pipefail

readonly NPM_PACKAGE="node-llama-cpp@3.21.1"
readonly COMMIT_SHORT="80fb11a"
# Bump when the build recipe changes; a cached build with another recipe is rebuilt.
readonly RECIPE="1"

check=0
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) printf '[engine-windows] unknown argument: %s (see --help)\n' "$arg" >&2; exit 2 ;;
  esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
toolchain="$repo/cmake/x86_64-w64-mingw32.cmake"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/kvgate"
engine_dir="$cache_root/engine/llama.cpp-$COMMIT_SHORT-windows-x86_64"
work="$cache_root/build/llama.cpp-$COMMIT_SHORT-windows"
exe="$engine_dir/bin/llama-server.exe"
export WINEPREFIX="$cache_root/wine"
export WINEDEBUG=-all
# No prompts to install Mono or Gecko when wine creates the prefix: llama-server needs neither.
export WINEDLLOVERRIDES="mscoree,mshtml="

log() { printf '[engine-windows] %s\n' "$*" >&2; }

find_wine() {
  local c
  for c in /usr/lib/wine/wine64 "$(command -v wine64 || true)" "$(command -v wine || true)"; do
    if [[ -n "$c" && -x "$c" ]]; then echo "$c"; return 0; fi
  done
  return 1
}
find_wineserver() {
  local c
  for c in /usr/lib/wine/wineserver "$(command -v wineserver || true)"; do
    if [[ -n "$c" && -x "$c" ]]; then echo "$c"; return 0; fi
  done
  return 1
}

# The DLLs an .exe imports, one a line.
imported_dlls() { x86_64-w64-mingw32-objdump -p "$1" | sed -n 's/^[[:space:]]*DLL Name: //p'; }

# DLLs every Windows installation has. Anything else (libgomp-1, libwinpthread-1,
# libstdc++-6, libgcc_s_seh-1) would have to ship beside the .exe: the build is meant to
# link those statically, so one of them showing up is an error.
is_system_dll() {
  local name="${1,,}"
  case "$name" in
    kernel32.dll|kernelbase.dll|ntdll.dll|msvcrt.dll|ucrtbase.dll|api-ms-win-*.dll|ws2_32.dll|mswsock.dll|\
    advapi32.dll|user32.dll|gdi32.dll|shell32.dll|shlwapi.dll|ole32.dll|oleaut32.dll|bcrypt.dll|\
    crypt32.dll|secur32.dll|userenv.dll|psapi.dll|dbghelp.dll|iphlpapi.dll|version.dll|winmm.dll|rpcrt4.dll)
      return 0 ;;
  esac
  return 1
}

build() {
  local tool
  for tool in npm git cmake ninja tar jq x86_64-w64-mingw32-gcc-posix x86_64-w64-mingw32-g++-posix x86_64-w64-mingw32-objdump; do
    command -v "$tool" >/dev/null || { log "missing '$tool': run scripts/setup.sh and scripts/windows-deps.sh (they install the Debian packages) first"; exit 1; }
  done
  [[ -f "$toolchain" ]] || { log "missing $toolchain"; exit 1; }

  rm -rf "$work" "$engine_dir"
  mkdir -p "$work" "$engine_dir/bin" "$engine_dir/logs" "$engine_dir/models"

  log "fetching $NPM_PACKAGE from the npm registry"
  (cd "$work" && npm pack --silent "$NPM_PACKAGE" >/dev/null)
  tar -xzf "$work"/node-llama-cpp-*.tgz -C "$work" package/llama/gitRelease.bundle

  log "cloning llama/gitRelease.bundle"
  git clone --quiet "$work/package/llama/gitRelease.bundle" "$work/src" 2>/dev/null
  local head
  head=$(git -C "$work/src" rev-parse HEAD)
  if [[ "$head" != "$COMMIT_SHORT"* ]]; then
    log "bundle is at $head, expected $COMMIT_SHORT: the npm package changed; refusing to build"
    exit 1
  fi

  # CPU target: GGML_NATIVE=OFF with SSE4.2/AVX/AVX2/FMA/F16C/BMI2 (x86-64-v3), the set the
  # native engine (scripts/engine.sh) is built with. -march=native would tie the .exe to the
  # build machine; AVX2 keeps the same ggml kernels kvgate is tested against on Linux and still
  # runs on any x86-64 PC from about 2015 on (Intel Haswell, AMD Zen); AVX-512 and AMX stay
  # off (not on most desktops, and AMX crashes this release on q8_0 weights). ggml leaves
  # every instruction set off when cross-compiling unless it is named, so each is named here.
  #
  # -Wa,-muse-unaligned-vector-move: GCC for 64-bit Windows does not realign the stack to 32
  # bytes, so an AVX value it spills to the stack may sit 16-byte aligned and an aligned
  # vmovaps/vmovdqa on it faults (GCC bug 54412). The assembler option turns those moves
  # into their unaligned forms, which cost nothing extra on AVX2 CPUs.
  #
  # Static: BUILD_SHARED_LIBS=OFF links llama and ggml into the .exe, and the toolchain file's
  # -static -static-libgcc -static-libstdc++ pulls libstdc++ and winpthreads in as well.
  # OpenMP (ggml's default thread pool, as in the native build) needs one more step: CMake's
  # FindOpenMP records the full path of the import library libgomp.dll.a, and a full path
  # wins over -static, so the .exe would need libgomp-1.dll. OpenMP_gomp_LIBRARY names the
  # static libgomp.a of the same compiler instead.
  #
  # Network: this release has no curl code (LLAMA_CURL is only a deprecation notice); its
  # HTTPS downloads go through OpenSSL, which is off (kvgate passes model files). No tests,
  # examples, web UI or unified binary: the server only, as in the native build.
  #
  # THREAD_POWER_THROTTLING_*: ggml-cpu.c turns off Windows 11's power throttling of its
  # worker threads with SetThreadInformation(ThreadPowerThrottling, THREAD_POWER_THROTTLING_STATE).
  # The headers of mingw-w64 before v11 (Debian 12 has v10) declare the call and the enum
  # value but not that struct or its constants. Windows defines it with the same three ULONGs
  # as PROCESS_POWER_THROTTLING_STATE, which the headers do have, and the constants are 1, so
  # when a probe compile finds the struct missing the names are defined on the C command line.
  local gomp_static
  gomp_static=$(x86_64-w64-mingw32-gcc-posix -print-file-name=libgomp.a)
  [[ -f "$gomp_static" ]] || { log "no static libgomp.a for x86_64-w64-mingw32-gcc-posix"; exit 1; }
  local vector_flags="-Wa,-muse-unaligned-vector-move"
  local c_flags="$vector_flags"
  if ! printf '#include <windows.h>\nTHREAD_POWER_THROTTLING_STATE probe;\n' |
       x86_64-w64-mingw32-gcc-posix -x c -fsyntax-only - 2>/dev/null; then
    log "mingw-w64 headers lack THREAD_POWER_THROTTLING_STATE: defining it as PROCESS_POWER_THROTTLING_STATE"
    c_flags+=" -DTHREAD_POWER_THROTTLING_STATE=PROCESS_POWER_THROTTLING_STATE"
    c_flags+=" -DTHREAD_POWER_THROTTLING_CURRENT_VERSION=1 -DTHREAD_POWER_THROTTLING_EXECUTION_SPEED=1"
  fi
  local configure=(
    cmake -S "$work/src" -B "$work/build" -G Ninja
    "-DCMAKE_TOOLCHAIN_FILE=$toolchain"
    -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_C_FLAGS=$c_flags"
    "-DCMAKE_CXX_FLAGS=$vector_flags"
    -DBUILD_SHARED_LIBS=OFF
    -DGGML_NATIVE=OFF
    -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
    -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
    -DGGML_OPENMP=ON "-DOpenMP_gomp_LIBRARY=$gomp_static"
    -DGGML_CUDA=OFF -DGGML_HIP=OFF -DGGML_MUSA=OFF -DGGML_SYCL=OFF -DGGML_VULKAN=OFF
    -DGGML_METAL=OFF -DGGML_WEBGPU=OFF -DGGML_BLAS=OFF -DGGML_RPC=OFF -DGGML_BACKEND_DL=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
  )
  local jobs="${KVGATE_BUILD_JOBS:-$(nproc)}"
  local build_cmd=(cmake --build "$work/build" --target llama-server -j "$jobs")

  log "configuring for x86_64-w64-mingw32 (log: $engine_dir/logs/configure.log)"
  "${configure[@]}" >"$engine_dir/logs/configure.log" 2>&1 \
    || { tail -n 30 "$engine_dir/logs/configure.log" >&2; log "configure failed (log: $engine_dir/logs/configure.log)"; exit 1; }

  log "building llama-server.exe with -j$jobs (log: $engine_dir/logs/build.log); this takes 10-25 minutes"
  local start=$SECONDS
  nice -n 10 "${build_cmd[@]}" >"$engine_dir/logs/build.log" 2>&1 \
    || { grep -m 20 -B2 -A8 'error' "$engine_dir/logs/build.log" >&2 || tail -n 40 "$engine_dir/logs/build.log" >&2
         log "build failed (log: $engine_dir/logs/build.log)"; exit 1; }
  local seconds=$((SECONDS - start))
  log "built in $seconds s"

  local built="$work/build/bin/llama-server.exe"
  [[ -f "$built" ]] || { log "the build finished without $built"; exit 1; }
  local dlls=() dll foreign=()
  mapfile -t dlls < <(imported_dlls "$built")
  for dll in "${dlls[@]}"; do is_system_dll "$dll" || foreign+=("$dll"); done
  if ((${#foreign[@]})); then
    log "llama-server.exe imports non-system DLLs: ${foreign[*]} (the static link did not take)"
    exit 1
  fi
  log "imports only Windows system DLLs: ${dlls[*]}"

  cp "$built" "$exe"
  cp "$work/src/models/"ggml-vocab-*.gguf "$engine_dir/models/"
  git -C "$work/src" rev-parse HEAD >"$engine_dir/COMMIT"

  local wine
  if wine=$(find_wine); then
    log "llama-server.exe --version under wine (creates $WINEPREFIX on first use)"
    # The version goes to stderr, after wine's own notes when it creates the prefix.
    timeout 300 "$wine" "$exe" --version >"$engine_dir/logs/version.log" 2>&1 || true
    tr -d '\r' <"$engine_dir/logs/version.log" | grep -E '^(version|built with)' >"$engine_dir/VERSION" || true
  fi

  json_array() { if (($#)); then printf '%s\n' "$@" | jq -R . | jq -cs .; else echo '[]'; fi; }
  jq -n \
    --arg commit "$(cat "$engine_dir/COMMIT")" \
    --arg source "npm $NPM_PACKAGE llama/gitRelease.bundle" \
    --argjson recipe "$RECIPE" \
    --arg cc "$(x86_64-w64-mingw32-gcc-posix --version | head -n 1)" \
    --arg cxx "$(x86_64-w64-mingw32-g++-posix --version | head -n 1)" \
    --arg binutils "$(x86_64-w64-mingw32-objdump --version | head -n 1)" \
    --argjson configure "$(json_array "${configure[@]}")" \
    --argjson build "$(json_array "${build_cmd[@]}")" \
    --argjson dlls "$(json_array "${dlls[@]}")" \
    --argjson jobs "$jobs" \
    --argjson seconds "$seconds" \
    --argjson ccache "$(if command -v ccache >/dev/null; then echo true; else echo false; fi)" \
    --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --arg version "$(cat "$engine_dir/VERSION" 2>/dev/null || true)" \
    '{binary: "bin/llama-server.exe", commit: $commit, source: $source, recipe: $recipe,
      target: "x86_64-w64-mingw32", cuda: false,
      toolchain: {file: "cmake/x86_64-w64-mingw32.cmake", cc: $cc, cxx: $cxx, binutils: $binutils,
                  exe_linker_flags: "-static -static-libgcc -static-libstdc++"},
      configure: $configure, build: $build, dlls: $dlls,
      jobs: $jobs, build_seconds: $seconds, ccache: $ccache, date: $date, version: $version}' >"$engine_dir/BUILD.json"

  echo "recipe $RECIPE" >"$engine_dir/ENGINE_OK"
  rm -rf "$work"
  log "built: $exe"
}

# A TCP port on 127.0.0.1 nothing listens on.
free_port() {
  local port _
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
  done
  return 1
}

run_check() {
  local tool
  for tool in curl jq; do
    command -v "$tool" >/dev/null || { log "missing '$tool' (the check needs it)"; exit 1; }
  done
  local wine wineserver
  wine=$(find_wine) || { log "wine not found (Debian: apt-get install wine64)"; exit 1; }
  wineserver=$(find_wineserver) || { log "wineserver not found"; exit 1; }
  local kvgate="${KVGATE_BIN:-}"
  if [[ -z "$kvgate" ]]; then
    if [[ -x "$repo/build/src/cli/kvgate" ]]; then kvgate="$repo/build/src/cli/kvgate"; else kvgate="$(command -v kvgate || true)"; fi
  fi
  if [[ -z "$kvgate" || ! -x "$kvgate" ]]; then
    log "kvgate not found${KVGATE_BIN:+ at '$KVGATE_BIN'}: the check writes its model with kvgate synth; build it first or set KVGATE_BIN"
    exit 1
  fi

  tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvgate-engine-windows.XXXXXX")
  server_pid=""
  trap stop_server EXIT

  log "check: writing a tiny random-weight model (kvgate synth --preset tiny-qwen3)"
  "$kvgate" synth --preset tiny-qwen3 --vocab "$engine_dir/models/ggml-vocab-qwen2.gguf" --out "$tmp/model.gguf" >&2
  local port model_win
  port=$(free_port) || { log "no free port found"; exit 1; }
  model_win="Z:${tmp//\//\\}\\model.gguf"

  log "check: starting llama-server.exe under wine on 127.0.0.1:$port (WINEPREFIX=$WINEPREFIX)"
  local t0=$EPOCHREALTIME
  "$wine" "$exe" --host 127.0.0.1 --port "$port" -c 2048 -m "$model_win" >"$tmp/server.log" 2>&1 &
  server_pid=$!

  local limit="${KVGATE_WINE_TIMEOUT:-300}" code=""
  while :; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/health" || true)
    [[ "$code" == 200 ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
      tr -d '\r' <"$tmp/server.log" | tail -n 30 >&2
      log "check failed: llama-server.exe exited before /health answered 200"
      exit 1
    fi
    if (( $(elapsed_s "$t0" | cut -d. -f1) >= limit )); then
      tr -d '\r' <"$tmp/server.log" | tail -n 30 >&2
      log "check failed: /health not 200 after $limit s (last: ${code:-no answer})"
      exit 1
    fi
    sleep 0.5
  done
  local health_s
  health_s=$(elapsed_s "$t0")
  log "check: /health 200 after $health_s s"

  local t1=$EPOCHREALTIME response
  response=$(curl -sS --max-time 300 -H 'Content-Type: application/json' \
    -d '{"prompt":"Hello","n_predict":8}' "http://127.0.0.1:$port/completion") \
    || { log "check failed: POST /completion did not answer"; exit 1; }
  local completion_s
  completion_s=$(elapsed_s "$t1")
  if ! jq -e '(.content | type == "string") and (.timings | type == "object")
              and (.timings.predicted_n | type == "number")' <<<"$response" >/dev/null 2>&1; then
    printf '%s\n' "$response" | head -c 2000 >&2
    log "check failed: /completion answered without content and timings"
    exit 1
  fi
  log "check: /completion answered in $completion_s s"
  log "check: content: $(jq -c '.content' <<<"$response")"
  log "check: timings: $(jq -c '.timings' <<<"$response")"
  jq -r '.timings | "check: prompt \(.prompt_n) tokens in \(.prompt_ms) ms (\(.prompt_per_second) t/s), predicted \(.predicted_n) tokens in \(.predicted_ms) ms (\(.predicted_per_second) t/s)"' \
    <<<"$response" | while IFS= read -r line; do log "$line"; done
  stop_server
  trap - EXIT
  log "check passed: llama-server.exe served a completion under wine"
}

# Seconds since an $EPOCHREALTIME value, with one decimal.
elapsed_s() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

stop_server() {
  if [[ -n "${server_pid:-}" ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
  local wineserver
  if wineserver=$(find_wineserver); then "$wineserver" -k 2>/dev/null || true; fi
  if [[ -n "${tmp:-}" ]]; then rm -rf "$tmp"; fi
  tmp=""
}

if [[ -f "$exe" && "$(cat "$engine_dir/ENGINE_OK" 2>/dev/null)" == "recipe $RECIPE" ]]; then
  log "cached: $exe"
else
  build
fi
if ((check)); then run_check; fi
echo "$engine_dir"
