#!/usr/bin/env bash
# Regenerates the measured tables of docs/RELIABILITY.md:
#   1. the fault-injection, abuse and load suites (CTest label "faults", KVGATE_FAULTS=1),
#      each case writing its outcome as JSON;
#   2. with --fuzz SECONDS, every libFuzzer target for SECONDS (two at a time; clang, ASan +
#      UBSan, build-fuzz), its executions, coverage and crashes;
#   3. scripts/reliability_table.py writes the tables between the document's markers.
#
#   scripts/reliability.sh [--build DIR] [--fuzz SECONDS] [--fuzz-targets "T1 T2"] [--no-faults]
#                          [--results DIR] [-- extra ctest args]
#
# --results keeps the records in DIR (and adds to the ones already there, e.g. to fuzz again
# only the targets given with --fuzz-targets and still write the whole table).
#
# Environment: KVGATE_LOAD_SECONDS (load run length, default 180), KVGATE_FAULT_SEED (kill
# points of the kvgate restart case). Needs the pinned engine (scripts/engine.sh); the session
# store cases need root (a loop-mounted ext4 image in a private mount namespace) and are
# skipped, and say so, without it.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build
fuzz_seconds=0
fuzz_targets=""
results=
faults=1
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --fuzz) fuzz_seconds=$2; shift 2 ;;
    --fuzz-targets) fuzz_targets=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --no-faults) faults=0; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

if [[ -z $results ]]; then results=$(mktemp -d /tmp/kvgate-reliability.XXXXXX); fi
mkdir -p "$results"
log() { printf '[reliability] %s\n' "$*" >&2; }
status=0

if [[ $faults == 1 ]]; then
  log "building the suites in $build"
  cmake --build "$build" -j2 --target kvgate gateway_fault_test cli_faults_e2e_test
  log "running the fault, abuse and load cases (long ones included); records in $results"
  KVGATE_FAULTS=1 KVGATE_RELIABILITY_OUT="$results" \
    ctest --test-dir "$build" -L '^(faults|tier2)$' -R 'Fault|Abuse|UpLoad' --output-on-failure -j1 "${extra[@]}" || status=$?
fi

if [[ $fuzz_seconds -gt 0 ]]; then
  log "building the fuzz targets (build-fuzz)"
  cmake --preset fuzz >/dev/null
  cmake --build build-fuzz -j2
  work=$(mktemp -d /tmp/kvgate-fuzz.XXXXXX)
  targets=(gguf_reader_fuzz chat_request_fuzz session_recognition_fuzz startup_log_fuzz sse_parser_fuzz http_head_fuzz)
  if [[ -n $fuzz_targets ]]; then read -r -a targets <<<"$fuzz_targets"; fi
  declare -A seeds=([gguf_reader_fuzz]=gguf [chat_request_fuzz]=chat_request [session_recognition_fuzz]=session_recognition
                    [startup_log_fuzz]=startup_log [sse_parser_fuzz]=sse_parser [http_head_fuzz]=http_head)
  run_one() {
    local t=$1 seed=$2 seconds=$3 work=$4
    mkdir -p "$work/$t-corpus" "$work/$t-artifacts"
    local dict=()
    [[ -f fuzz/$seed.dict ]] && dict=(-dict="fuzz/$seed.dict")
    build-fuzz/fuzz/"$t" "$work/$t-corpus" "fuzz/corpus/$seed" "${dict[@]}" -max_total_time="$seconds" \
      -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 -artifact_prefix="$work/$t-artifacts/" \
      >"$work/$t.log" 2>&1 || true
  }
  export -f run_one
  log "fuzzing ${#targets[@]} targets for $fuzz_seconds s each, two at a time; logs in $work"
  for t in "${targets[@]}"; do echo "$t ${seeds[$t]}"; done |
    xargs -P 2 -L 1 bash -c 'run_one "$0" "$1" '"$fuzz_seconds $work"
  for t in "${targets[@]}"; do
    python3 - "$t" "$fuzz_seconds" "$work" "$results" <<'EOF' || status=1
import json, pathlib, re, sys
t, seconds, work, results = sys.argv[1], int(sys.argv[2]), pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4])
log = (work / f"{t}.log").read_text(errors="replace")
stats = [l for l in log.splitlines() if re.match(r"#\d+\s+(DONE|pulse|NEW|REDUCE|INITED)", l)]
last = stats[-1] if stats else ""
num = lambda key: int(m.group(1)) if (m := re.search(rf"{key}: (\d+)", last)) else 0
runs = re.search(r"Done (\d+) runs in (\d+) second", log)
execs = int(runs.group(1)) if runs else int(re.match(r"#(\d+)", last).group(1)) if last else 0
crashes = len(list((work / f"{t}-artifacts").glob("*")))
corp = re.search(r"corp: (\d+)/", last)
rec = {"target": t, "seconds": seconds, "executions": execs,
       "exec_per_s": execs // max(1, int(runs.group(2)) if runs else seconds),
       "cov": num("cov"), "ft": num("ft"), "corpus": int(corp.group(1)) if corp else 0, "crashes": crashes}
(results / f"fuzz-{t}.json").write_text(json.dumps(rec, indent=2))
print(json.dumps(rec))
if crashes:
    sys.exit(1)
EOF
  done
fi

python3 scripts/reliability_table.py "$results" docs/RELIABILITY.md
log "records kept in $results"
exit "$status"
