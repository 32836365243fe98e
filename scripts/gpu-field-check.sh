#!/usr/bin/env bash
# The GPU field check: one command that builds the pinned engine for the card, synthesizes a
# model of the first field report's shape (a Qwen3.5-27B-shaped hybrid, q4_0 weights) and a
# dense one, starts each with `kvgate up` with every layer on the GPU, checks the plan against
# the startup log, measures the prefill curve and its cliff, replays an agent trace through the
# gateway, and times one long conversation's saved KV against its re-prefill. Every figure is
# read from the engine or measured; `--cpu` runs the same steps on tiny models with the cached
# CPU engine (the CTest test gpu_field_check_cpu). Usage: scripts/gpu-field-check.sh --help.
set -euo pipefail

readonly ENGINE_COMMIT="80fb11a"
readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly PACK_DIR="$ROOT/.gpu-field-check"
readonly TRACE="$ROOT/tests/fixtures/traces/agent-timestamp.jsonl.zst"

usage() {
  cat <<EOF
usage: scripts/gpu-field-check.sh [--cpu] [--out DIR] [options]
       scripts/gpu-field-check.sh --pack

Runs, in one command (about 9 minutes on one H100 with 16 cores, most of it nvcc):
  1. kvgate engine build of the pinned llama.cpp ($ENGINE_COMMIT) with CUDA for the card's
     architecture only (nvidia-smi's compute capability; the dry-run plan is checked for it);
  2. kvgate synth: a Qwen3.5-27B-shaped hybrid (64 layers, 16 with KV, 4 KV heads x 256,
     q4_0 weights, about 15 GiB) and a dense 48-layer x 4 KV heads x 128 model (q4_0);
  3. kvgate up on each with --ngl all, and kvgate doctor on its startup log: the verdict of
     the plan against what the engine allocated (offload N/N, KV type and size, CUDA buffers);
  4. kvgate bench prefill against the running engine from 4K up to the largest context that
     fits (kvgate plan --fit on the card's memory; at most --max-ctx), with the cliff if any;
  5. kvgate bench replay of a 30-turn agent trace through the gateway: TTFT at turn 30 and 2;
  6. one long conversation's KV saved and restored through llama-server's /slots actions,
     timed against re-prefilling it (the engine's own save_ms, restore_ms and prompt_ms).

Results (CSV, JSON, one SVG, a markdown fragment field-check.md for docs/BENCHMARKS.md) go
to --out (default \$OUT, else ./gpu-field-check-out). The big files (models, engine build,
saved KV) stay in --work.

What the GPU machine needs: nvidia-smi, nvcc, cmake, a C++ compiler, curl, xz or git. It
has no network, so the pinned engine's source must travel with the working tree:
  - run '$0 --pack' on a machine that built the CPU engine (scripts/engine.sh: the npm
    cache holds the release) to write .gpu-field-check/ (git-ignored, about 20 MiB): the
    source as a tarball and a kvgate binary with its shared libraries; carry that folder; or
  - give --engine-src DIR|FILE.tar.xz|FILE.bundle, or --engine DIR of an engine already built.
kvgate itself: --kvgate PATH, else build/src/cli/kvgate, else .gpu-field-check/bin/kvgate.
Without the source there is no GPU run: the script stops and says so.

options:
  --cpu              tiny models, the cached CPU engine (scripts/engine.sh), short sizes
  --out DIR          where the results go
  --work DIR         models, engine build, logs, saved KV, kept (default: a temporary
                     folder, removed at the end)
  --engine-src PATH  the pinned engine's source (folder, .tar.xz/.tar.gz or git bundle)
  --engine DIR       an engine kvgate engine build wrote (DIR/bin/llama-server): no build
  --kvgate PATH      the kvgate binary
  --jobs N           engine build -j (default: kvgate's choice)
  --max-ctx N        largest prefill size (GPU default 131072; the sweep stops at the fit)
  --turns N          replay turns (GPU 30, CPU 4)
  --budget S         skip the replay and the dense model once S seconds have passed (GPU 480)
  --check            exit 1 unless the results hold what the test expects (used by CTest)
  --pack             write .gpu-field-check/ for a GPU machine without network, then exit
EOF
}

# --- options ------------------------------------------------------------------------------

mode=gpu out="${OUT:-}" work="" engine_src="" engine_dir="" kvgate="" jobs="" max_ctx=""
turns="" budget="" check=0 pack=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu) mode=cpu ;;
    --out) out="$2"; shift ;;
    --work) work="$2"; shift ;;
    --engine-src) engine_src="$2"; shift ;;
    --engine) engine_dir="$2"; shift ;;
    --kvgate) kvgate="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --max-ctx) max_ctx="$2"; shift ;;
    --turns) turns="$2"; shift ;;
    --budget) budget="$2"; shift ;;
    --check) check=1 ;;
    --pack) pack=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-field-check: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done

readonly START=$SECONDS
log() { printf '[field-check %4ds] %s\n' "$((SECONDS - START))" "$*" >&2; }
die() { printf 'gpu-field-check: %s\n' "$*" >&2; exit 1; }
need() { command -v "$1" >/dev/null || die "'$1' is not installed: $2"; }

# The first number after "KEY": in a JSON file (flat fields of kvgate's and the engine's
# answers; no jq needed on the GPU machine).
json_num() {
  grep -o "\"$2\": *-\?[0-9][0-9.eE+-]*" "$1" | head -1 | sed 's/.*: *//'
}

# --- the one-time pack for a machine without network --------------------------------------

pack_for_gpu() {
  need xz "apt install xz-utils"
  local bundle_dir src
  bundle_dir="$(mktemp -d)"
  trap 'rm -rf "$bundle_dir"' RETURN
  log "reading the pinned release from the npm cache (node-llama-cpp@3.21.1, as scripts/engine.sh)"
  (cd "$bundle_dir" && npm pack --offline --silent node-llama-cpp@3.21.1 >/dev/null) ||
    die "node-llama-cpp@3.21.1 is not in the npm cache: run scripts/engine.sh once with network first"
  tar -xzf "$bundle_dir"/node-llama-cpp-*.tgz -C "$bundle_dir" package/llama/gitRelease.bundle
  src="$bundle_dir/src"
  git clone --quiet "$bundle_dir/package/llama/gitRelease.bundle" "$src" 2>/dev/null
  [[ "$(git -C "$src" rev-parse HEAD)" == "$ENGINE_COMMIT"* ]] || die "the bundle is not at $ENGINE_COMMIT"
  mkdir -p "$PACK_DIR/bin" "$PACK_DIR/lib"
  # The source without its history, documentation and test vocabularies but qwen2's (synth's).
  tar -C "$src" --exclude=./.git --exclude=./docs --exclude='./models/*' -cf "$bundle_dir/src.tar" .
  tar -C "$src" -rf "$bundle_dir/src.tar" ./models/ggml-vocab-qwen2.gguf
  xz -T0 -6 -c "$bundle_dir/src.tar" >"$PACK_DIR/llama.cpp-$ENGINE_COMMIT.tar.xz"
  local bin="${kvgate:-$ROOT/build/src/cli/kvgate}"
  [[ -x "$bin" ]] || die "no kvgate at $bin: build it first (cmake --build build --target kvgate)"
  strip -o "$PACK_DIR/bin/kvgate" "$bin"
  # Its shared libraries but the C library's own, for a machine without the -dev packages.
  ldd "$bin" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    xargs -r -I{} cp -L {} "$PACK_DIR/lib/"
  du -sh "$PACK_DIR" >&2
  log "wrote $PACK_DIR: carry it with the working tree (it is git-ignored)"
}

# --- the engine ---------------------------------------------------------------------------

find_kvgate() {
  local candidates=("$kvgate" "$ROOT/build/src/cli/kvgate" "$PACK_DIR/bin/kvgate" "$(command -v kvgate || true)")
  for k in "${candidates[@]}"; do
    [[ -n "$k" && -x "$k" ]] || continue
    if [[ "$k" == "$PACK_DIR/bin/kvgate" ]]; then export LD_LIBRARY_PATH="$PACK_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
    if "$k" --help >/dev/null 2>&1; then kvgate="$k"; return; fi
    log "kvgate at $k does not run here ($("$k" --help 2>&1 | head -1))"
  done
  die "no kvgate that runs here: build it (cmake --preset default && cmake --build build --target kvgate), give --kvgate, or carry .gpu-field-check/ (--pack)"
}

# Unpacks the pinned source into $work/llama.cpp and prints its folder.
engine_source() {
  local from="$engine_src"
  [[ -z "$from" && -f "$PACK_DIR/llama.cpp-$ENGINE_COMMIT.tar.xz" ]] && from="$PACK_DIR/llama.cpp-$ENGINE_COMMIT.tar.xz"
  [[ -n "$from" ]] || die "the pinned engine's source ($ENGINE_COMMIT) is not here and this machine may have no network: run '$0 --pack' where scripts/engine.sh ran and carry .gpu-field-check/, or give --engine-src PATH (or --engine DIR of a CUDA build)"
  [[ -e "$from" ]] || die "--engine-src '$from' does not exist"
  if [[ -d "$from" ]]; then echo "$from"; return; fi
  local dir="$work/llama.cpp"
  rm -rf "$dir" && mkdir -p "$dir"
  case "$from" in
    *.bundle) git clone --quiet "$from" "$dir" 2>/dev/null ;;
    *.tar.xz) xz -dc "$from" | tar -xf - -C "$dir" ;;
    *) tar -xzf "$from" -C "$dir" ;;
  esac
  echo "$dir"
}

# Sets $server and $vocab. CPU: the cached pinned build. GPU: kvgate engine build with CUDA
# for this card's architecture, checked in the dry-run plan first.
prepare_engine() {
  if [[ "$mode" == cpu ]]; then
    engine_dir="$(KVGATE_BIN="$kvgate" "$ROOT/scripts/engine.sh" | tail -1)"
    server="$engine_dir/bin/llama-server"
    vocab="$engine_dir/models/ggml-vocab-qwen2.gguf"
    return
  fi
  need nvidia-smi "the NVIDIA driver; use --cpu on a machine without a GPU"
  local cc arch src
  cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' ')"
  [[ "$cc" =~ ^[0-9]+\.[0-9]+$ ]] || die "nvidia-smi gave no compute capability ('$cc')"
  arch="${cc/./}"
  nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv >"$out/gpu.csv"
  if [[ -n "$engine_dir" ]]; then
    server="$engine_dir/bin/llama-server"
    [[ -x "$server" ]] || die "--engine $engine_dir holds no bin/llama-server"
  else
    src="$(engine_source)"
    log "engine source: $src; planning the CUDA build for compute capability $cc"
    "$kvgate" engine build "$src" --cuda on --kv-quant q4_0 --dry-run >"$out/engine-build-plan.txt"
    grep -q "CMAKE_CUDA_ARCHITECTURES=$arch\b" "$out/engine-build-plan.txt" ||
      die "the build plan does not target architecture $arch only (see $out/engine-build-plan.txt)"
    engine_dir="$work/engine"
    log "building llama-server with CUDA for sm_$arch (log: $engine_dir/logs/build.log)"
    "$kvgate" engine build "$src" --cuda on --kv-quant q4_0 --out "$engine_dir" \
      --build-dir "$work/engine-build" ${jobs:+--jobs "$jobs"} >/dev/null
    mkdir -p "$engine_dir/models"
    cp "$src/models/ggml-vocab-qwen2.gguf" "$engine_dir/models/"
    server="$engine_dir/bin/llama-server"
  fi
  [[ -f "$engine_dir/BUILD.json" ]] && cp "$engine_dir/BUILD.json" "$out/engine-build.json"
  vocab="$engine_dir/models/ggml-vocab-qwen2.gguf"
  [[ -f "$vocab" ]] || die "no ggml-vocab-qwen2.gguf for kvgate synth (expected in the engine source's models/)"
}

# --- models -------------------------------------------------------------------------------

synth_models() {
  local common=(--vocab "$vocab" --type q4_0)
  if [[ "$mode" == cpu ]]; then
    "$kvgate" synth --arch qwen35 "${common[@]}" --out "$work/hybrid.gguf" >&2
    "$kvgate" synth --arch qwen3 "${common[@]}" --out "$work/dense.gguf" >&2
    return
  fi
  # Qwen3.5-27B's text model (kvgate synth --preset qwen35-27b, there metadata-only).
  "$kvgate" synth --arch qwen35 --layers 64 --embd 5120 --heads 24 --heads-kv 4 --head-dim 256 --rope-dim 64 \
    --ff 17408 --ssm-state 128 --ssm-groups 16 --ssm-heads 48 --ctx-train 256k --name "Qwen3.5-27B shape" \
    "${common[@]}" --out "$work/hybrid.gguf" >&2
  # The first report's dense formula: 48 layers x 4 KV heads x 128.
  "$kvgate" synth --arch qwen3 --layers 48 --embd 2048 --heads 32 --heads-kv 4 --head-dim 128 --ff 6144 \
    --ctx-train 256k --name "48-layer dense shape" "${common[@]}" --out "$work/dense.gguf" >&2
}

# --- one model under kvgate up ------------------------------------------------------------

up_pid="" up_port=$((20000 + $$ % 20000)) own_work=0
stop_up() {
  if [[ -n "$up_pid" ]] && kill -0 "$up_pid" 2>/dev/null; then
    kill -TERM "$up_pid" 2>/dev/null || true
    wait "$up_pid" 2>/dev/null || true
  fi
  up_pid=""
}
# At exit: kvgate up stopped, a work folder this run made removed (models of 15 GiB).
finish() {
  stop_up
  if ((own_work)); then rm -rf "$work"; fi
}
trap finish EXIT

# The context to start with: the largest that fits the card (kvgate plan --fit), or $1 on CPU.
fit_context() {
  local model="$1" ctk="$2" cpu_ctx="$3"
  if [[ "$mode" == cpu ]]; then echo "$cpu_ctx"; return; fi
  local mib
  mib="$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -d ' ')"
  "$kvgate" plan "$model" --ctx 0 --ctk "$ctk" --fa on --fit --memory "${mib}MiB" --json >"$work/fit-$ctk.json"
  json_num "$work/fit-$ctk.json" max_ctx
}

# start_up NAME MODEL CTX CTK: kvgate up in the background until its engine is ready.
# Sets $engine_url and $engine_key. Deep health probes are off: they would use the slot.
start_up() {
  local name="$1" model="$2" ctx="$3" ctk="$4"
  up_port=$((up_port + 1))
  local gpu_args=(--ngl all) ; [[ "$mode" == cpu ]] && gpu_args=(--threads 2)
  "$kvgate" up "$model" --listen "127.0.0.1:$up_port" --server "$server" --ctx "$ctx" --ctk "$ctk" --fa on \
    "${gpu_args[@]}" --state-dir "$work/state-$name" --log-dir "$work/logs-$name" --health-interval 24h \
    --start-timeout 10m >"$work/up-$name.log" 2>&1 &
  up_pid=$!
  local status="$work/status-$name.json"
  for _ in $(seq 1 600); do
    kill -0 "$up_pid" 2>/dev/null || { tail -20 "$work/up-$name.log" >&2; die "kvgate up ($name) exited before it was ready"; }
    if curl -sf "http://127.0.0.1:$up_port/kvgate/v1/status" -o "$status" && grep -q '"state": *"ready"' "$status"; then
      engine_url="http://127.0.0.1:$(json_num "$status" port)"
      engine_key="$(cat "$work/state-$name/engine.key")"
      cp "$status" "$out/up-status-$name.json"
      return
    fi
    sleep 1
  done
  die "kvgate up ($name) was not ready in 10 minutes (log: $work/up-$name.log)"
}

# kvgate doctor on the startup log with the plan's settings: its JSON and verdict.
plan_check() {
  local name="$1" model="$2" ctx="$3" ctk="$4" rc=0
  local gpu_args=() ; [[ "$mode" == cpu ]] && gpu_args=(--no-gpu)
  "$kvgate" doctor --log "$work/logs-$name/engine.log" -m "$model" --ctx "$ctx" --ctk "$ctk" --fa on \
    "${gpu_args[@]}" --json >"$out/plan-check-$name.json" || rc=$?
  "$kvgate" doctor --log "$work/logs-$name/engine.log" -m "$model" --ctx "$ctx" --ctk "$ctk" --fa on \
    "${gpu_args[@]}" >"$out/plan-check-$name.txt" 2>&1 || true
  if [[ $rc -eq 0 ]]; then verdict[$name]=pass; else verdict[$name]="FAIL (exit $rc)"; fi
  log "plan against the startup log ($name): ${verdict[$name]}"
}

# The sizes of the sweep: powers of two from 4K (512 on CPU) to the largest below the context.
sweep_sizes() {
  local ctx="$1" limit="$2" n sizes=""
  n=$([[ "$mode" == cpu ]] && echo 512 || echo 4096)
  while ((n + 512 <= ctx && n <= limit)); do sizes+="${sizes:+,}$n"; n=$((n * 2)); done
  echo "$sizes"
}

prefill_sweep() {
  local name="$1" ctx="$2" sizes reps
  sizes="$(sweep_sizes "$ctx" "$max_ctx")"
  reps=1
  log "prefill sweep ($name): $sizes tokens, $reps run(s) each"
  "$kvgate" bench prefill --url "$engine_url" --api-key "$engine_key" --ctx "$sizes" --reps "$reps" \
    --out "$work/prefill-$name" >"$out/prefill-$name.txt"
  cp "$work/prefill-$name/prefill.csv" "$out/prefill-$name.csv"
  cp "$work/prefill-$name/prefill.json" "$out/prefill-$name.json"
  [[ "$name" == hybrid ]] && cp "$work/prefill-$name/prefill.svg" "$out/prefill.svg"
  return 0
}

# --- the saved conversation against its re-prefill ----------------------------------------

# N random token ids as a JSON array (the same ids for the same seed).
token_ids() {
  awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed); printf "["; for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 1000 + int(rand() * 90000); printf "]" }'
}

engine_post() {  # engine_post PATH BODY_FILE OUT_FILE
  curl -sf -X POST -H "Authorization: Bearer $engine_key" -H 'Content-Type: application/json' \
    --data-binary "@$2" --max-time 1800 "$engine_url$1" -o "$3" || die "POST $1 to the engine failed"
}

# One conversation of N tokens is prefilled and saved; its next turn (64 more tokens) is timed
# once re-prefilled from nothing and once after restoring the saved state.
kv_restore() {
  local n="$1" d="$work/kv-restore"
  mkdir -p "$d"
  local first more
  first="$(token_ids "$n" 7)"
  more="$(token_ids 64 8)"
  printf '{"prompt":%s,"n_predict":0,"cache_prompt":true,"id_slot":0}' "$first" >"$d/turn1.json"
  printf '{"prompt":%s,%s,"n_predict":0,"cache_prompt":true,"id_slot":0}' "${first%]}" "${more#[}" >"$d/turn2.json"
  echo '{"filename":"field-check.bin"}' >"$d/file.json"
  echo '{}' >"$d/empty.json"
  log "KV save and restore: a $n-token conversation"
  engine_post "/slots/0?action=erase" "$d/empty.json" "$d/erase0.out"
  engine_post /completion "$d/turn1.json" "$d/prefill.out"
  engine_post "/slots/0?action=save" "$d/file.json" "$d/save.out"
  engine_post "/slots/0?action=erase" "$d/empty.json" "$d/erase1.out"
  engine_post /completion "$d/turn2.json" "$d/reprefill.out"
  engine_post "/slots/0?action=erase" "$d/empty.json" "$d/erase2.out"
  engine_post "/slots/0?action=restore" "$d/file.json" "$d/restore.out"
  engine_post /completion "$d/turn2.json" "$d/resumed.out"
  local row
  row="$n,$(json_num "$d/prefill.out" prompt_ms),$(json_num "$d/save.out" n_saved),$(json_num "$d/save.out" n_written)"
  row+=",$(json_num "$d/save.out" save_ms),$(json_num "$d/reprefill.out" prompt_n),$(json_num "$d/reprefill.out" prompt_ms)"
  row+=",$(json_num "$d/restore.out" n_restored),$(json_num "$d/restore.out" restore_ms)"
  row+=",$(json_num "$d/resumed.out" prompt_n),$(json_num "$d/resumed.out" prompt_ms)"
  echo "tokens,prefill_ms,n_saved,bytes_written,save_ms,reprefill_tokens,reprefill_ms,n_restored,restore_ms,resumed_tokens,resumed_ms" >"$out/kv-restore.csv"
  echo "$row" >>"$out/kv-restore.csv"
  # The engine's answers: the slot actions whole, the completions' timings (not their text).
  {
    printf '{\n  "save": %s,\n  "restore": %s' "$(cat "$d/save.out")" "$(cat "$d/restore.out")"
    for f in prefill reprefill resumed; do
      printf ',\n  "%s": {"cache_n": %s, "prompt_n": %s, "prompt_ms": %s}' "$f" "$(json_num "$d/$f.out" cache_n)" \
        "$(json_num "$d/$f.out" prompt_n)" "$(json_num "$d/$f.out" prompt_ms)"
    done
    printf '\n}\n'
  } >"$out/kv-restore.json"
}

# --- the replay ---------------------------------------------------------------------------

replay() {
  local ctx engine_args
  if [[ "$mode" == cpu ]]; then ctx=16384 engine_args="-t 2"; else ctx=65536 engine_args="-ngl 999 -fa on -ctk q4_0 -ctv q4_0"; fi
  log "replay: $turns turns of the agent trace through the gateway (context $ctx)"
  "$kvgate" bench replay "$TRACE" --model "$work/hybrid.gguf" --server "$server" --engine-args "$engine_args" \
    --ctx "$ctx" --turns "$turns" --plain-words --paths gateway --out "$work/replay" >"$out/replay.txt"
  cp "$work/replay/replay.csv" "$out/replay.csv"
  cp "$work/replay/replay.json" "$out/replay.json"
}

# --- results ------------------------------------------------------------------------------

# Column $2 (by name) of the row whose first columns match $3 in CSV $1.
csv_field() {
  awk -F, -v col="$2" -v key="$3" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
    index($0, key) == 1 && c { print $c; exit }' "$1"
}

stage() {  # stage NAME SECONDS_AT_START
  echo "$1,$((SECONDS - $2))" >>"$out/stages.csv"
}

write_fragment() {
  local f="$out/field-check.md" device
  device="$([[ "$mode" == cpu ]] && echo "CPU ($(nproc) cores), the cached pinned CPU engine" || tail -1 "$out/gpu.csv")"
  {
    echo "GPU field check, $([[ "$mode" == cpu ]] && echo "--cpu run" || echo "GPU run"), $(date -u +%Y-%m-%dT%H:%MZ), kvgate $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $((SECONDS - START)) s"
    echo
    echo "Device: $device."
    echo
    echo "| check | model | figure |"
    echo "|---|---|---|"
    for name in hybrid dense; do
      [[ -n "${verdict[$name]:-}" ]] || continue
      echo "| plan vs startup log | $name | ${verdict[$name]} ($(json_num "$out/plan-check-$name.json" n_ctx) ctx; $(grep -c '^  ok' "$out/plan-check-$name.txt" || true) items verified) |"
      local last
      last="$(tail -1 "$out/prefill-$name.csv" | cut -d, -f1)"
      echo "| prefill tokens/s at $(head -2 "$out/prefill-$name.csv" | tail -1 | cut -d, -f1) / $last tokens | $name | $(csv_field "$out/prefill-$name.csv" tokens_per_s "$(head -2 "$out/prefill-$name.csv" | tail -1 | cut -d, -f1),") / $(csv_field "$out/prefill-$name.csv" tokens_per_s "$last,") |"
      echo "| prefill cliff | $name | $(grep -m1 -E '^(no cliff|cliff at)' "$out/prefill-$name.txt" | sed 's/|/\\|/g') |"
    done
    if [[ -f "$out/replay.csv" ]]; then
      echo "| replay TTFT, turn 2 / turn $turns (ms) | hybrid | $(csv_field "$out/replay.csv" ttft_ms gateway,2,) / $(csv_field "$out/replay.csv" ttft_ms "gateway,$turns,") |"
    fi
    if [[ -f "$out/kv-restore.csv" ]]; then
      local row; row="$(tail -1 "$out/kv-restore.csv")"
      IFS=, read -r n _ _ bytes save_ms re_n re_ms _ restore_ms res_n res_ms <<<"$row"
      echo "| KV of a $n-token conversation: save / restore + next turn / re-prefill (ms) | hybrid | $save_ms / $restore_ms + $res_ms ($res_n tokens) / $re_ms ($re_n tokens); $bytes bytes |"
    fi
    [[ -n "$skipped" ]] && echo && echo "Skipped for the time budget: $skipped."
    echo
    echo "Stage times (s): $(tail -n +2 "$out/stages.csv" | paste -sd' ' | tr ',' '=')"
  } >"$f"
  cat "$f"
}

# The test's checks: files exist, rows hold positive figures the engine gave, verdicts passed.
check_results() {
  local bad=0
  fail() { echo "check failed: $*" >&2; bad=1; }
  positive() { awk -v v="$1" 'BEGIN { exit !(v + 0 > 0) }'; }
  for name in hybrid dense; do
    [[ "${verdict[$name]:-}" == pass ]] || fail "plan vs startup log ($name): ${verdict[$name]:-not run}"
    grep -q '"ok": *true' "$out/plan-check-$name.json" || fail "kvgate doctor's JSON ($name) is not ok"
    local rows; rows="$(($(wc -l <"$out/prefill-$name.csv") - 1))"
    ((rows >= 2)) || fail "prefill-$name.csv has $rows rows"
    while IFS= read -r v; do positive "$v" || fail "prefill-$name.csv: tokens/s '$v'"; done \
      < <(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "tokens_per_s") c = i; next } { print $c }' "$out/prefill-$name.csv")
  done
  [[ -s "$out/prefill.svg" ]] || fail "no prefill.svg"
  local t2 tn; t2="$(csv_field "$out/replay.csv" ttft_ms gateway,2,)"; tn="$(csv_field "$out/replay.csv" ttft_ms "gateway,$turns,")"
  positive "$t2" && positive "$tn" || fail "replay TTFT at turn 2 '$t2', turn $turns '$tn'"
  IFS=, read -r n _ n_saved _ save_ms re_n re_ms n_restored restore_ms res_n res_ms < <(tail -1 "$out/kv-restore.csv")
  [[ "$n_saved" == "$n" && "$n_restored" == "$n" ]] || fail "saved $n_saved and restored $n_restored of $n tokens"
  positive "$re_ms" && positive "$res_ms" || fail "re-prefill ${re_ms} ms, resumed ${res_ms} ms"
  ((res_n < re_n)) || fail "the turn after the restore computed $res_n tokens, the re-prefill $re_n: the restore was not used"
  awk -v a="$restore_ms" -v b="$res_ms" -v c="$re_ms" 'BEGIN { exit !(a + b < c) }' ||
    fail "restore ($restore_ms ms) + the next turn ($res_ms ms) not faster than re-prefill ($re_ms ms)"
  [[ -s "$out/field-check.md" ]] || fail "no field-check.md"
  return $bad
}

# --- main ---------------------------------------------------------------------------------

if ((pack)); then pack_for_gpu; exit 0; fi

need curl "apt install curl"
if [[ "$mode" == cpu ]]; then
  : "${max_ctx:=2048}" "${turns:=4}" "${budget:=100000}"
else
  : "${max_ctx:=131072}" "${turns:=30}" "${budget:=480}"
fi
((turns >= 2)) || die "--turns must be at least 2 (turn 2 is the reference)"
[[ -n "$out" ]] || out="$PWD/gpu-field-check-out"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rm -f "$out"/*.csv "$out"/*.json "$out"/*.txt "$out"/*.md "$out"/*.svg
if [[ -z "$work" ]]; then work="$(mktemp -d "${TMPDIR:-/tmp}/gpu-field-check.XXXXXX")" own_work=1; fi
mkdir -p "$work"
echo "stage,seconds" >"$out/stages.csv"
declare -A verdict=()
skipped=""

find_kvgate
log "mode $mode; results in $out; work in $work; kvgate $kvgate"
t=$SECONDS; prepare_engine; stage engine "$t"
log "engine: $server"
t=$SECONDS; synth_models; stage synth "$t"

ctx="$(fit_context "$work/hybrid.gguf" q4_0 8192)"
t=$SECONDS; start_up hybrid "$work/hybrid.gguf" "$ctx" q4_0; stage up-hybrid "$t"
plan_check hybrid "$work/hybrid.gguf" "$ctx" q4_0
t=$SECONDS; kv_restore "$([[ "$mode" == cpu ]] && echo 1024 || echo 32768)"; stage kv-restore "$t"
t=$SECONDS; prefill_sweep hybrid "$ctx"; stage prefill-hybrid "$t"
stop_up

if ((SECONDS - START < budget)); then
  t=$SECONDS; replay; stage replay "$t"
else
  skipped+="the replay "
fi
if ((SECONDS - START < budget)); then
  ctx="$(fit_context "$work/dense.gguf" q8_0 8192)"
  t=$SECONDS; start_up dense "$work/dense.gguf" "$ctx" q8_0; stage up-dense "$t"
  plan_check dense "$work/dense.gguf" "$ctx" q8_0
  t=$SECONDS; prefill_sweep dense "$ctx"; stage prefill-dense "$t"
  stop_up
else
  skipped+="the dense model"
fi
stage total "$START"
write_fragment
log "done in $((SECONDS - START)) s: $(ls "$out" | tr '\n' ' ')"
if ((check)); then
  check_results || exit 1
  log "checks passed"
fi
