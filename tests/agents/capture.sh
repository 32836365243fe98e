#!/usr/bin/env bash
# Records what the agent CLIs send when they talk straight to the pinned llama-server.
#
#   tests/agents/capture.sh OUTDIR [CLI...]          (CLIs: claude codex qwen; default all three)
#
# Writes a random-weight qwen3 model with the release's tokenizer (`kvgate synth --preset
# tiny-qwen3`), starts the pinned engine on it (-c 32768 -np 1 --jinja: one slot, large enough
# for Claude Code's first prompt), then runs each CLI RUNS times (default 3) in one working folder
# with one HOME, as one user would, each run through its own record_proxy.mjs, and then once more
# continuing the last run's conversation with a second prompt (run_agent.sh AGENT_CONTINUE=1, in
# OUTDIR/<cli>/continue). Leaves:
#   OUTDIR/engine.log                       the engine's output
#   OUTDIR/paths.env                        the working folder and HOME of each CLI
#   OUTDIR/<cli>/run<N>/requests/NNN.json   every exchange of the run (record_proxy.mjs)
#   OUTDIR/<cli>/run<N>/{stdout.txt,stderr.txt,exit_code,elapsed_s,command.txt}  (run_agent.sh)
#   OUTDIR/<cli>/continue/...               the same for the continued conversation
# then prints the summary of tests/agents/capture_summary.mjs.
#
# The engine's sampling is biased (--logit-bias; the requests themselves are left as the CLIs
# make them): WORD_BIAS (default 100) on 17 common English words and on <|im_end|>, so that an
# answer is plain words that the engine's output parser accepts and ends after ~20 tokens, as the
# gateway's e2e tests bias theirs. WORD_BIAS=0 leaves raw noise: EOS_BIAS (default 3) then only
# raises <|im_end|> so that answers end after tens of tokens instead of running to the CLI's
# max_tokens (32000 for Claude Code and Qwen Code), and the engine fails most answers with a
# 500 ("does not match the expected peg-native format").
#
# Environment: KVGATE (default: build/src/cli/kvgate of this checkout), KVGATE_SERVER (default: the
# pinned engine under ~/.cache/kvgate/engine), RUNS, WORD_BIAS, EOS_BIAS, and run_agent.sh's
# AGENT_* variables.
# The CLIs come from tests/agents/node_modules (tests/fixtures/agents/README.md says how to
# install them). One run takes from seconds to a few minutes: a random-weight model answers
# noise, and each CLI stops when its answer ends or fails to parse.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
die() { echo "capture: $*" >&2; exit 2; }
[[ $# -ge 1 ]] || die "usage: $0 OUTDIR [claude] [codex] [qwen]"
outdir=$1
shift
clis=("$@")
[[ ${#clis[@]} -gt 0 ]] || clis=(claude codex qwen)
runs=${RUNS:-3}
eos_bias=${EOS_BIAS:-3}
word_bias=${WORD_BIAS:-100}
# <|im_end|> in the release's qwen2 tokenizer, which the synthesized model carries (checked below).
eos_token=151645
kvgate=${KVGATE:-$root/build/src/cli/kvgate}
[[ -x "$kvgate" ]] || die "no kvgate binary at $kvgate (build it, or set KVGATE)"
server=${KVGATE_SERVER:-$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/kvgate/engine/llama.cpp-*/bin/llama-server 2>/dev/null | head -n1)}
[[ -x "$server" ]] || die "no llama-server (run scripts/setup.sh, or set KVGATE_SERVER)"
command -v node >/dev/null || die "node is needed"

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kvgate-agents.XXXXXX")
export AGENT_API_KEY=${AGENT_API_KEY:-kvgate-test-key}
server_pid=
proxy_pid=
cleanup() {
  if [[ -n "$proxy_pid" ]]; then kill "$proxy_pid" 2>/dev/null || true; fi
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -f "$work/model.gguf"
}
trap cleanup EXIT

free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

"$kvgate" synth --preset tiny-qwen3 --out "$work/model.gguf" >/dev/null
# start_engine ARGS...: the engine on the model, on a free port, until it answers /health.
start_engine() {
  port=$(free_port)
  "$server" -m "$work/model.gguf" --host 127.0.0.1 --port "$port" -c 32768 -np 1 --jinja -t 2 \
    --api-key "$AGENT_API_KEY" "$@" >>"$outdir/engine.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 120); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then return 0; fi
    kill -0 "$server_pid" 2>/dev/null || die "the engine exited; see $outdir/engine.log"
    sleep 0.5
  done
  die "the engine did not become ready; see $outdir/engine.log"
}
stop_engine() {
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}
engine_post() {
  curl -sf -H "Authorization: Bearer $AGENT_API_KEY" "http://127.0.0.1:$port$1" -d "$2"
}

# The sampling biases are token ids: read them from a first start of the engine.
: > "$outdir/engine.log"
start_engine
eos_text=$(engine_post /detokenize "{\"tokens\":[$eos_token]}")
[[ "$eos_text" == '{"content":"<|im_end|>"}' ]] || die "token $eos_token is $eos_text, not <|im_end|>"
bias=()
if [[ "$word_bias" != 0 ]]; then
  words=$(engine_post /tokenize '{"content":" the of and to a in is it that for on with as was he by at"}')
  for id in $(echo "$words" | tr -c '0-9' ' '); do bias+=(--logit-bias "$id+$word_bias"); done
  bias+=(--logit-bias "$eos_token+$word_bias")
elif [[ "$eos_bias" != 0 ]]; then
  bias=(--logit-bias "$eos_token+$eos_bias")
fi
stop_engine
start_engine "${bias[@]}"
echo "capture: engine on port $port with ${bias[*]:-no bias}" >&2

: > "$outdir/paths.env"
for cli in "${clis[@]}"; do
  workdir=$work/$cli/work
  home=$work/$cli/home
  mkdir -p "$workdir" "$home"
  cp -r "$here/workdir/." "$workdir/"
  echo "${cli}_workdir=$workdir" >> "$outdir/paths.env"
  echo "${cli}_home=$home" >> "$outdir/paths.env"
  for run in $(seq "$runs") continue; do
    rundir=$outdir/$cli/run$run
    continued=()
    if [[ "$run" == continue ]]; then
      rundir=$outdir/$cli/continue
      continued=(AGENT_CONTINUE=1 "AGENT_PROMPT=Now say in one sentence what tides.py prints.")
    fi
    rm -rf "$rundir"
    mkdir -p "$rundir"
    node "$here/record_proxy.mjs" --upstream "http://127.0.0.1:$port" --out "$rundir/requests" \
      --port-file "$rundir/proxy.port" >"$rundir/proxy.log" 2>&1 &
    proxy_pid=$!
    for _ in $(seq 50); do [[ -s "$rundir/proxy.port" ]] && break; sleep 0.1; done
    [[ -s "$rundir/proxy.port" ]] || die "the recording proxy did not start; see $rundir/proxy.log"
    env AGENT_HOME="$home" "${continued[@]}" \
      "$here/run_agent.sh" "$cli" "http://127.0.0.1:$(cat "$rundir/proxy.port")" "$workdir" "$rundir"
    kill "$proxy_pid"
    wait "$proxy_pid" 2>/dev/null || true
    proxy_pid=
    rm -f "$rundir/proxy.port"
    echo "capture: $cli $(basename "$rundir"): exit $(cat "$rundir/exit_code") after $(cat "$rundir/elapsed_s") s," \
      "$(ls "$rundir/requests" 2>/dev/null | wc -l) requests" >&2
  done
done
node "$here/capture_summary.mjs" "$outdir"
