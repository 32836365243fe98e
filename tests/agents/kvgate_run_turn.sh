#!/usr/bin/env bash
# One headless turn of an agent CLI started by `kvgate run`, the first of a conversation or
# the next one of the last conversation in WORKDIR (each agent's own continue or resume).
#
#   tests/agents/kvgate_run_turn.sh AGENT KVGATE_URL WORKDIR HOME OUTDIR TURN [PROMPT]
#
# AGENT       claude, codex, qwen, opencode, kilo, pi or cn (what `kvgate run` takes)
# KVGATE_URL  the running kvgate, e.g. http://127.0.0.1:8787
# WORKDIR     the folder the agent works in
# HOME        the agent's HOME (it keeps its conversations there): the same for every turn
# OUTDIR      created; receives stdout.txt, stderr.txt, exit_code (124 = the time limit),
#             elapsed_s, command.txt
# TURN        1 starts a conversation; 2 and later continue the last one
#
# Environment: KVGATE (the kvgate binary, default build/src/cli/kvgate), AGENT_TIMEOUT
# (seconds, default 300), KVGATE_API_KEY (passed on). The CLIs come from
# tests/agents/node_modules (its .bin on PATH; Claude Code's native binary by --agent-bin).
# Claude Code's answers are capped at 512 tokens (CLAUDE_CODE_MAX_OUTPUT_TOKENS, which
# kvgate run leaves to the caller): it reports a reply that reaches its cap as an error.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
die() { echo "kvgate_run_turn: $*" >&2; exit 2; }
[[ $# -ge 6 ]] || die "usage: $0 AGENT KVGATE_URL WORKDIR HOME OUTDIR TURN [PROMPT]"
agent=$1 url=$2 workdir=$3 home=$4 outdir=$5 turn=$6
prompt=${7:-"Turn $turn: list the files in this folder and say in one sentence what README.md says."}
kv=${KVGATE:-$here/../../build/src/cli/kvgate}
modules=$here/node_modules
[[ -d "$modules/.bin" ]] || die "no $modules: npm install --prefix tests/agents"
mkdir -p "$outdir" "$home"
home=$(cd "$home" && pwd)
more=$([[ "$turn" -gt 1 ]] && echo 1 || echo 0)

bin=()
case "$agent" in
  claude)
    b=$(ls "$modules"/@anthropic-ai/claude-code-linux-*/claude 2>/dev/null | head -n1)
    [[ -n "$b" ]] || die "no Claude Code binary for this platform under $modules/@anthropic-ai"
    bin=(--agent-bin "$b")
    args=(-p "$prompt" --output-format json --max-turns 1)
    [[ $more == 1 ]] && args+=(--continue) ;;
  codex)
    args=(-c features.plugins=false -c 'history.persistence="none"' exec --skip-git-repo-check
      --color never)
    [[ $more == 1 ]] && args+=(resume --last)
    args+=("$prompt") ;;
  qwen)
    args=(--output-format json --max-session-turns 1 "$prompt")
    [[ $more == 1 ]] && args+=(--continue) ;;
  opencode | kilo)
    args=(run --format json)
    [[ $more == 1 ]] && args+=(--continue)
    args+=("$prompt") ;;
  pi)
    args=(-p "$prompt")
    [[ $more == 1 ]] && args+=(-c) ;;
  cn)
    args=(-p --auto "$prompt")
    [[ $more == 1 ]] && args+=(--resume) ;;
  *) die "unknown agent '$agent'" ;;
esac

env_run=(HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_CACHE_HOME="$home/.cache"
  XDG_DATA_HOME="$home/.local/share" XDG_STATE_HOME="$home/.local/state"
  PATH="$modules/.bin:$PATH" LANG=C.UTF-8 TERM=dumb NO_COLOR=1 CI=1
  CLAUDE_CODE_MAX_OUTPUT_TOKENS=512)
[[ -n "${KVGATE_API_KEY:-}" ]] && env_run+=(KVGATE_API_KEY="$KVGATE_API_KEY")
command=("$kv" run "$agent" --url "$url" "${bin[@]}" -- "${args[@]}")
{ echo "cwd: $workdir"; printf '%q ' "${command[@]}"; echo; } > "$outdir/command.txt"
started=$(date +%s%N)
status=0
(cd "$workdir" && env -i "${env_run[@]}" timeout --kill-after=10 "${AGENT_TIMEOUT:-300}" \
  "${command[@]}" </dev/null >"$outdir/stdout.txt" 2>"$outdir/stderr.txt") || status=$?
echo "$status" > "$outdir/exit_code"
ms=$(( ($(date +%s%N) - started) / 1000000 ))
printf '%d.%03d\n' $((ms / 1000)) $((ms % 1000)) > "$outdir/elapsed_s"
