#!/usr/bin/env bash
# Re-records tests/fixtures/ik/ from a real ik_llama.cpp llama-server build.
#
#   scripts/record-ik-fixtures.sh [PATH/TO/ik/llama-server]     (default: $KVGATE_IK_SERVER)
#
# Needs the kvgate binary of this checkout (build/src/cli/kvgate, or $KVGATE) and the pinned
# engine's tokenizer (scripts/engine.sh), curl and jq. Writes:
#   help.txt                    `llama-server --help` (stdout; it exits 1)
#   probes.txt                  kvgate's own probe record of the build: `kvgate plan --server`
#                               probes it with kvgate's probe list (plan::flag_probes) into a
#                               private cache, which is copied with the machine-specific parts
#                               (binary path, mtime, size) replaced by `llama-server` and 0
#   startup-<kind>.log          a start with the command `kvgate plan --ctx 8192` prints, on a
#                               synthesized model of each kind, stdout and stderr together
#   startup-<kind>.stderr.log   the same start, stderr only
#   crash-<case>.log            starts the CPU build cannot run (stdout and stderr together)
#   error-<case>.json           ik's HTTP error bodies; errors.tsv: case, HTTP status, request
# Run it again after kvgate's probe list changes (probes.txt must hold every probe).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
ik=${1:-${KVGATE_IK_SERVER:-}}
kvgate=${KVGATE:-$here/build/src/cli/kvgate}
out=$here/tests/fixtures/ik

die() { echo "record-ik-fixtures: $*" >&2; exit 1; }
[[ -n "$ik" ]] || die "usage: $0 PATH/TO/ik_llama.cpp/bin/llama-server (or set KVGATE_IK_SERVER)"
[[ -x "$ik" ]] || die "'$ik' is not an executable file"
[[ -x "$kvgate" ]] || die "no kvgate binary at $kvgate (build it: cmake --build build --target kvgate)"
command -v curl >/dev/null || die "curl is needed"
command -v jq >/dev/null || die "jq is needed"
ik=$(readlink -f "$ik")

work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n "$server_pid" ]]; then kill -9 "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts the server in $work (models are named relative to it, so no temporary path lands in
# a log) with its output redirected as "$2" says; waits for /health or its exit.
start_server() {
  local log=$1 mode=$2
  shift 2
  port=$(free_port)
  case "$mode" in
    both) (cd "$work" && exec "$ik" "$@" --host 127.0.0.1 --port "$port" >"$log" 2>&1) & ;;
    stderr) (cd "$work" && exec "$ik" "$@" --host 127.0.0.1 --port "$port" 2>"$log" >/dev/null) & ;;
  esac
  server_pid=$!
  for _ in $(seq 1 300); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      wait "$server_pid" || true
      server_pid=
      return 1
    fi
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then return 0; fi
    sleep 0.2
  done
  die "the server did not answer /health within 60 s (log: $log)"
}

stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

# The command kvgate would run for this model, without the binary (one argument a line).
plan_command() {
  (cd "$work" && XDG_CACHE_HOME="$work/cache" "$kvgate" plan "$1" --server "$ik" --ctx 8192 --json) |
    jq -r '.command[1:][]'
}

echo "record-ik-fixtures: $ik -> $out" >&2
"$ik" --version 2>&1 | head -1 >&2

# ---- help and probes ----
# Paths of this machine: the binary (usage lines) and its folder (crash-handler backtraces).
neutral() { sed -e "s|$ik|llama-server|g" -e "s|$(dirname "$ik")/|.../bin/|g"; }
"$ik" --help 2>/dev/null | neutral >"$out/help.txt" || true
for kind in llama qwen3 qwen35 gemma3; do
  "$kvgate" synth --preset "tiny-$kind" --out "$work/tiny-$kind.gguf" >/dev/null
done
mapfile -t cmd < <(plan_command tiny-qwen3.gguf)
records=("$work"/cache/kvgate/probe/*.txt)
[[ ${#records[@]} -eq 1 && -f "${records[0]}" ]] || die "expected one probe record in $work/cache/kvgate/probe"
# The header's binary/mtime_ns/size identify this machine's file; the usage lines name its path.
neutral <"${records[0]}" | sed -e 's/^mtime_ns .*/mtime_ns 0/' -e 's/^size .*/size 0/' >"$out/probes.txt"

# ---- startup logs, one per model kind ----
for kind in llama qwen3 qwen35 gemma3; do
  mapfile -t cmd < <(plan_command "tiny-$kind.gguf")
  start_server "$out/startup-$kind.log" both "${cmd[@]}" || die "tiny-$kind did not start: $out/startup-$kind.log"
  stop_server
  start_server "$out/startup-$kind.stderr.log" stderr "${cmd[@]}" || die "tiny-$kind did not start (stderr run)"
  stop_server
done

# ---- starts the CPU build cannot run ----
mapfile -t cmd < <(plan_command tiny-qwen3.gguf)
record_crash() {
  local name=$1
  shift
  if start_server "$work/crash.log" both "${cmd[@]}" "$@"; then
    stop_server
    die "the start with $* did not fail: $(tail -5 "$work/crash.log")"
  fi
  neutral <"$work/crash.log" >"$out/crash-$name.log"
}
record_crash bf16 -ctk bf16 -ctv bf16
record_crash f32-no-fa -ctk f32 -ctv f32 -fa off
record_crash q8_KV -ctv q8_KV

# ---- HTTP error bodies ----
start_server "$work/errors-server.log" both -m tiny-qwen3.gguf -c 256 -np 1 -fa auto --context-shift off --jinja ||
  die "the server for the error bodies did not start: $(tail -5 "$work/errors-server.log")"
words() { local n=$1 s=; for _ in $(seq 1 "$n"); do s+="hello "; done; echo "${s% }"; }
printf 'case\tstatus\trequest\n' >"$out/errors.tsv"
record_error() {
  local name=$1 path=$2 body=$3 status
  status=$(curl -s -o "$out/error-$name.json" -w '%{http_code}' "http://127.0.0.1:$port$path" \
    -H 'Content-Type: application/json' --data-binary "$body")
  printf '%s\t%s\tPOST %s %s\n' "$name" "$status" "$path" "$(printf '%s' "$body" | cut -c1-120)" >>"$out/errors.tsv"
}
# -c 256: a 400-word prompt does not fit; a 200-word one fills the context while generating.
record_error prompt-exceeds-context /v1/chat/completions \
  "{\"messages\":[{\"role\":\"user\",\"content\":\"$(words 400)\"}],\"max_tokens\":4}"
record_error context-filled-generating /v1/chat/completions \
  "{\"messages\":[{\"role\":\"user\",\"content\":\"$(words 200)\"}],\"max_tokens\":200}"
# Token 160 of the qwen2 vocabulary is the lone byte 0xE4 (a UTF-8 lead byte): forcing it makes
# the answer invalid UTF-8, which the server's JSON library refuses to write.
record_error invalid-utf8-output /completion '{"prompt":"hi","n_predict":1,"logit_bias":[[160,100]],"temperature":0}'
record_error invalid-utf8-output-chat /v1/chat/completions \
  '{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"logit_bias":{"160":100},"temperature":0}'
stop_server

echo "record-ik-fixtures: done" >&2
