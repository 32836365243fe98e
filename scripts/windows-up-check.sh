#!/usr/bin/env bash
# `kvgate.exe up` under wine, end to end (scripts/cross-windows.sh runs it):
#   windows-up-check.sh LLAMA_SERVER_EXE MODEL.gguf WORK_DIR
# launches the engine through kvgate.exe, asks a chat through the gateway, kills the engine
# (the supervisor must restart it and the next chat be answered), starts a second `up` on the
# same model (refused, naming the first), then kills kvgate.exe (the engine must go with it:
# a job object that dies with kvgate). Last, a new `up` is found by `kvgate.exe engine build
# --stop-running` (short of memory on a recorded Orin) and stopped through its stop event:
# it must exit 0 with its engine gone. Each step's figure is printed.
set -euo pipefail
server=$1 model=$2 work=$3
log() { printf '[windows-up] %s\n' "$*" >&2; }
fail() { log "FAILED: $*"; tail -30 "$work/up.err" >&2 || true; exit 1; }

wine=/usr/lib/wine/wine64
[[ -x $wine ]] || wine=$(command -v wine64 || command -v wine)
kvgate_exe=("$wine" "$(cd "$(dirname "$0")/.." && pwd)/build-windows/src/cli/kvgate.exe")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export XDG_CACHE_HOME="$work/cache"  # a fresh state, locks and logs folder (Z:\... under wine)

# Waits up to $2 s for a line matching $1 in the log.
wait_for_log() {
  local deadline=$((SECONDS + $2))
  until grep -q -- "$1" "$work/up.err" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    [[ -z ${kvgate_pid:-} ]] || kill -0 "$kvgate_pid" 2>/dev/null || return 1  # it exited
    sleep 0.5
  done
}
chat() {
  curl -s -m 120 -o "$work/chat.json" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
    -H 'content-type: application/json' \
    -d "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"$1\"}],\"max_tokens\":8}"
}
engine_pids() { pgrep -f "llama-server.exe -m .*$(basename "$model")" || true; }

start=$SECONDS
"${kvgate_exe[@]}" up "$model" --server "$server" --listen "127.0.0.1:$port" -c 4096 >"$work/up.out" 2>"$work/up.err" &
kvgate_pid=$!
wait_for_log "kvgate up: gateway:" 180 || fail "kvgate.exe up was not ready in 180 s"
log "ready in $((SECONDS - start)) s: $(grep -o 'ready in [0-9.]* s' "$work/up.err" | head -1) (kvgate's own figure)"

code=$(chat "Hello from wine")
[[ $code == 200 ]] && grep -q '"choices"' "$work/chat.json" || fail "first chat: HTTP $code $(head -c 300 "$work/chat.json")"
log "chat 1: HTTP 200, usage $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"])' "$work/chat.json")"

[[ -n "$(engine_pids)" ]] || fail "no llama-server.exe process found"
log "killing the engine (SIGKILL to llama-server.exe, pid $(engine_pids | tr '\n' ' '))"
pkill -9 -f "llama-server.exe -m .*$(basename "$model")"
wait_for_log "engine start #2" 60 || fail "the engine was not started again in 60 s"
wait_for_log "verifying -> ready.*" 60 || fail "the restarted engine was not verified"
code=$(chat "Hello again after the crash")
[[ $code == 200 ]] && grep -q '"choices"' "$work/chat.json" || fail "chat after the restart: HTTP $code $(head -c 300 "$work/chat.json")"
log "engine restarted: $(grep -c 'engine start #' "$work/up.err") starts; chat 2: HTTP 200"

port2=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
set +e
"${kvgate_exe[@]}" up "$model" --server "$server" --listen "127.0.0.1:$port2" -c 4096 >/dev/null 2>"$work/up2.err"
rc=$?
set -e
[[ $rc != 0 ]] && grep -q "is already served" "$work/up2.err" || fail "a second up on the same model: exit $rc, $(tail -2 "$work/up2.err")"
log "second up refused (exit $rc): $(grep -o 'is already served: kvgate up (pid [0-9]*)' "$work/up2.err")"
python3 -c 'import socket,sys; s=socket.socket(); sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) else 1)' "$port2" ||
  fail "the refused up listens on its port"

kill -9 "$kvgate_pid"
deadline=$((SECONDS + 15))
while [[ -n "$(engine_pids)" ]]; do
  ((SECONDS < deadline)) || fail "llama-server.exe still runs 15 s after kvgate.exe was killed"
  sleep 0.5
done
log "kvgate.exe killed: the engine went with it"

# The running-instance list and a graceful stop, as `engine build --stop-running` uses them.
"${kvgate_exe[@]}" up "$model" --server "$server" --listen "127.0.0.1:$port" -c 4096 >"$work/up.out" 2>"$work/up.err" &
kvgate_pid=$!
wait_for_log "kvgate up: gateway:" 180 || fail "the second kvgate.exe up was not ready in 180 s"
tree="$work/llama.cpp"  # the files engine build reads to know a tree
mkdir -p "$tree/include" "$tree/ggml" "$tree/tools/server"
printf 'option(LLAMA_BUILD_SERVER "" ON)\n' >"$tree/CMakeLists.txt"
printf 'option(GGML_CUDA "" OFF)\n' >"$tree/ggml/CMakeLists.txt"
: >"$tree/include/llama.h"
: >"$tree/tools/server/CMakeLists.txt"
orin="$(cd "$(dirname "$0")/.." && pwd)/tests/fixtures/device/orin-agx-32g"  # 6 nvcc jobs fit, 8 cores: short
"${kvgate_exe[@]}" engine build "$tree" --dry-run --device-root "$orin" --nvcc nvcc.exe --stop-running >"$work/plan.out" 2>&1 ||
  fail "engine build --dry-run: $(tail -3 "$work/plan.out")"
grep -q "^# --stop-running would first stop: kvgate up, pid " "$work/plan.out" ||
  fail "the running kvgate.exe up was not found: $(grep -i 'warning\|stop' "$work/plan.out" | head -3)"
log "engine build --dry-run found it: $(grep -o 'kvgate up (pid [0-9]*)' "$work/plan.out" | head -1), $(grep -o 'resident [0-9.]* [KMG]iB' "$work/plan.out" | head -1)"
set +e
"${kvgate_exe[@]}" engine build "$tree" --out "$work/engine" --device-root "$orin" --nvcc nvcc.exe --stop-running \
  >"$work/build.out" 2>&1
set -e
grep -q "stopping kvgate up (pid .*its stop event" "$work/build.out" || fail "no stop: $(tail -3 "$work/build.out")"
set +e
wait "$kvgate_pid"
rc=$?
set -e
[[ $rc == 0 ]] || fail "kvgate.exe up exited $rc after its stop event (0 expected)"
grep -q "received: stopping" "$work/up.err" || fail "kvgate.exe up did not say it was stopping"
[[ -z "$(engine_pids)" ]] || fail "llama-server.exe still runs after kvgate.exe up stopped"
log "engine build --stop-running: kvgate.exe up stopped through its stop event (exit 0, '$(grep -o 'a stop request received' "$work/up.err")'), the engine gone"
