#!/usr/bin/env bash
# Benchmark: kvgate plan's total against the measured peak RSS of the pinned llama-server on
# CPU. Synthesizes a ~2 GB dense model (qwen3, 16 layers, 2048 wide, f16), plans it with the
# same settings the server is started with (no prompt cache, no reserve: neither is process
# memory at startup), starts the server, sends one completion so every weight page and the
# compute buffer are touched, and reads VmHWM from /proc.
#
#   scripts/plan_rss.sh [BUILD_DIR] [CTX]      (defaults: build, 32768)
set -euo pipefail

BUILD=${1:-build}
CTX=${2:-32768}
KVGATE="$BUILD/src/cli/kvgate"
WORK=$(mktemp -d)
trap 'kill "${PID:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

MODEL="$WORK/model.gguf"
"$KVGATE" synth --arch qwen3 --layers 16 --embd 2048 --heads 16 --heads-kv 4 --head-dim 128 --ff 5632 \
  --ctx-train 131072 --out "$MODEL" >/dev/null
SERVER=$(ls "${XDG_CACHE_HOME:-$HOME/.cache}"/kvgate/engine/llama.cpp-80fb11a-*/bin/llama-server | head -1)

OPTS=(--ctx "$CTX" --np 1 --ctk f16 --no-gpu --cache-ram 0 --reserve 0)
"$KVGATE" plan "$MODEL" "${OPTS[@]}" --json >"$WORK/plan.json"
PLANNED=$(jq '.totals.total_bytes' "$WORK/plan.json")

PORT=$((20000 + RANDOM % 20000))
mapfile -t ARGS < <(jq -r '.command[1:][]' "$WORK/plan.json")
"$SERVER" "${ARGS[@]}" -t 2 --port "$PORT" >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.2
done
PROMPT=$(python3 -c 'print(" ".join(["word"] * 1500))')
curl -sf "http://127.0.0.1:$PORT/completion" -H 'Content-Type: application/json' \
  -d "{\"prompt\": \"$PROMPT\", \"n_predict\": 4}" >/dev/null
HWM_KB=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status")
kill "$PID"

MEASURED=$((HWM_KB * 1024))
python3 - "$PLANNED" "$MEASURED" "$CTX" <<'EOF'
import sys
planned, measured, ctx = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
mib = 1048576
print(f"ctx {ctx}: planned total {planned / mib:.2f} MiB, measured peak RSS {measured / mib:.2f} MiB, "
      f"difference {100 * (planned - measured) / measured:+.2f}%")
EOF
