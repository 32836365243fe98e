#!/usr/bin/env bash
# Regenerates the figures of docs/BENCHMARKS.md with `kvgate bench` on the pinned engine and
# synthesized models. Opt-in (not part of the test suite): about 35 minutes on a 2-core
# machine (prefill 12, replays 11 and 7, overhead 3), most of it in full re-prefills, and
# about 21 more for the client family (clients: every behaviour at 16K and 32K, with and
# without --plain-words).
#
#   scripts/benchmarks.sh [BUILD_DIR] [OUT_DIR]      (defaults: build, BUILD_DIR/benchmarks)
#
# Every step writes its CSV, JSON and SVG files into its own folder under OUT_DIR and its
# summary to OUT_DIR/STEP.txt and OUT_DIR/summary.txt; scripts/benchmarks_doc.py then writes
# the summaries, tables and charts into docs/BENCHMARKS.md. Steps can be chosen with KVGATE_BENCH_STEPS (a list of
# prefill, replay, overhead, clients; default all). Client seeds: KVGATE_CLIENT_SEEDS (default 1); client runs:
# KVGATE_CLIENT_RUNS (default "16k 16k-plain 32k 32k-plain"; the table keeps the rows of runs left out). Engine threads: KVGATE_BENCH_THREADS (default
# nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${1:-build}
OUT=${2:-$BUILD/benchmarks}
STEPS=${KVGATE_BENCH_STEPS:-prefill replay overhead clients}
SEEDS=${KVGATE_CLIENT_SEEDS:-1}
CLIENT_RUNS=${KVGATE_CLIENT_RUNS:-16k 16k-plain 32k 32k-plain}
THREADS=${KVGATE_BENCH_THREADS:-$(nproc)}
KVGATE="$BUILD/src/cli/kvgate"
TRACES=tests/fixtures/traces
ENGINE_ARGS="-t $THREADS"

log() { printf '[benchmarks] %s\n' "$*" >&2; }
[[ -x "$KVGATE" ]] || { log "no $KVGATE: build kvgate first (scripts/setup.sh)"; exit 1; }
mkdir -p "$OUT/models"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
run() {  # run NAME ARGS...: one benchmark, its summary appended to summary.txt
  local name=$1
  shift
  log "$name: kvgate $*"
  "$KVGATE" "$@" | grep -v '^wrote: ' | tee "$OUT/$name.txt"
  { echo "== $name: kvgate $*"; cat "$OUT/$name.txt"; echo; } >>"$SUMMARY"
}

# The models: the built-in default shape (tiny qwen3: 4 layers, 128 wide) for the replays
# and the overhead, and small-qwen3 (12 layers, 256 wide) for the prefill curve.
"$KVGATE" synth --preset tiny-qwen3 --out "$OUT/models/tiny-qwen3.gguf" >/dev/null
"$KVGATE" synth --preset small-qwen3 --out "$OUT/models/small-qwen3.gguf" >/dev/null

for step in $STEPS; do
  case $step in
    prefill)
      run prefill bench prefill --model "$OUT/models/small-qwen3.gguf" --engine-args "$ENGINE_ARGS" \
        --ctx 1k..32k --reps 2 --out "$OUT/prefill"
      ;;
    replay)
      for trace in agent-timestamp agent-zh-reasoning; do
        run "replay-$trace" bench replay "$TRACES/$trace.jsonl.zst" --model "$OUT/models/tiny-qwen3.gguf" \
          --engine-args "$ENGINE_ARGS" --ctx 32k --plain-words --out "$OUT/replay-$trace"
      done
      ;;
    overhead)
      run overhead bench overhead --model "$OUT/models/tiny-qwen3.gguf" --engine-args "$ENGINE_ARGS" \
        --reps 200 --large-bytes 1MiB --large-reps 30 --stream-tokens 64 --stream-reps 20 --out "$OUT/overhead"
      ;;
    clients)
      for client_run in $CLIENT_RUNS; do
        ctx=${client_run%%-*}
        words=""
        [[ "$client_run" == *-plain ]] && words=--plain-words
        run "clients-$client_run" bench clients --model "$OUT/models/tiny-qwen3.gguf" \
          --engine-args "$ENGINE_ARGS" --ctx "$ctx" --behaviours all --seeds "$SEEDS" --turns 30 $words \
          --out "$OUT/clients-$client_run"
      done
      ;;
    *) log "unknown step '$step' (prefill, replay, overhead, clients)"; exit 2 ;;
  esac
done
python3 scripts/benchmarks_doc.py "$OUT" docs/BENCHMARKS.md
log "done: $SUMMARY"
