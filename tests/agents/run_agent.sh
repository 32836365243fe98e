#!/usr/bin/env bash
# Runs one agent CLI once, headless, with a fixed short prompt, against a model server.
#
#   tests/agents/run_agent.sh CLI BASE_URL WORKDIR OUTDIR
#
# CLI       claude (Claude Code: POST /v1/messages), codex (Codex CLI: POST /v1/responses),
#           qwen (Qwen Code: POST /v1/chat/completions) or opencode (opencode: POST
#           /v1/chat/completions, through its bundled OpenAI-compatible provider)
# BASE_URL  the server's root, e.g. http://127.0.0.1:8080 (no /v1: each CLI adds its own paths)
# WORKDIR   the folder the CLI works in (its cwd); left as the CLI leaves it
# OUTDIR    created if missing; receives stdout.txt, stderr.txt, exit_code (the CLI's status;
#           124 = killed by the time limit), elapsed_s, command.txt (the command and the
#           variables set, without the key) and, unless AGENT_HOME is set, home/ (the HOME the
#           CLI ran with, its configuration and whatever it wrote there)
#
# Environment (all optional):
#   AGENT_API_KEY            the key the CLI sends (default kvgate-test-key): Claude Code as
#                            x-api-key, Codex and Qwen Code as Authorization: Bearer
#   AGENT_MODEL              the model name the CLI asks for (default kvgate-local)
#   AGENT_PROMPT             the prompt (default: list the files and say what README.md says)
#   AGENT_TIMEOUT            seconds before the CLI is killed (default 300)
#   AGENT_HOME               HOME for the CLI (default OUTDIR/home, new for each run); point
#                            several runs at one folder to run them as one user would
#   AGENT_MAX_OUTPUT_TOKENS  cap on each answer, set through the CLI's own setting (Claude Code
#                            CLAUDE_CODE_MAX_OUTPUT_TOKENS, Qwen Code
#                            model.generationConfig.samplingParams.max_tokens); unset = the CLI's
#                            default. Codex has no such setting (it sends no max_output_tokens):
#                            cap it at the server (llama-server -n N)
#   AGENT_MAX_TURNS          cap on model turns (Claude Code --max-turns, Qwen Code
#                            --max-session-turns; Codex has no such option)
#   AGENT_CONTINUE           1 = continue the most recent conversation of this HOME and
#                            WORKDIR with the prompt as the next user turn (Claude Code
#                            --continue, Codex exec resume --last, Qwen Code --continue)
#
# Every CLI gets a private HOME, so nothing of the caller's configuration is read or written,
# and each CLI's documented switches for telemetry, update checks, error reports and other
# calls to its vendor are set (tests/fixtures/agents/README.md says which and why). The
# binaries come from tests/agents/node_modules (npm install --prefix tests/agents: see
# tests/fixtures/agents/README.md for why not npm ci).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
die() { echo "run_agent: $*" >&2; exit 2; }
[[ $# -eq 4 ]] || die "usage: $0 claude|codex|qwen|opencode BASE_URL WORKDIR OUTDIR"
cli=$1 base_url=${2%/} workdir=$3 outdir=$4
[[ -d "$workdir" ]] || die "no folder $workdir"
mkdir -p "$outdir"
workdir=$(cd "$workdir" && pwd)
outdir=$(cd "$outdir" && pwd)

api_key=${AGENT_API_KEY:-kvgate-test-key}
model=${AGENT_MODEL:-kvgate-local}
prompt=${AGENT_PROMPT:-"List the files in this folder and say in one sentence what README.md says."}
time_limit=${AGENT_TIMEOUT:-300}
home=${AGENT_HOME:-$outdir/home}
max_out=${AGENT_MAX_OUTPUT_TOKENS:-}
max_turns=${AGENT_MAX_TURNS:-}
continue_last=${AGENT_CONTINUE:-0}
mkdir -p "$home"
home=$(cd "$home" && pwd)
modules=$here/node_modules
[[ -d "$modules" ]] || die "no $modules: run npm install --prefix tests/agents"

# The variables every CLI runs with: a private HOME and XDG folders, no proxy, no colour.
env_common=(
  HOME="$home"
  XDG_CONFIG_HOME="$home/.config" XDG_CACHE_HOME="$home/.cache" XDG_DATA_HOME="$home/.local/share"
  XDG_STATE_HOME="$home/.local/state"
  PATH="$PATH" LANG=C.UTF-8 TERM=dumb NO_COLOR=1 CI=1
)
env_cli=()
args=()

case "$cli" in
  claude)
    # Claude Code's native build, from its platform package (the wrapper package's bin is
    # the same file once its install script has run).
    bin=$(ls "$modules"/@anthropic-ai/claude-code-linux-*/claude 2>/dev/null | head -n1)
    [[ -n "$bin" ]] || die "no Claude Code binary for this platform under $modules/@anthropic-ai"
    env_cli=(
      ANTHROPIC_BASE_URL="$base_url" ANTHROPIC_API_KEY="$api_key"
      ANTHROPIC_MODEL="$model" ANTHROPIC_DEFAULT_OPUS_MODEL="$model"
      ANTHROPIC_DEFAULT_SONNET_MODEL="$model" ANTHROPIC_DEFAULT_HAIKU_MODEL="$model"
      ANTHROPIC_SMALL_FAST_MODEL="$model"
      CLAUDE_CONFIG_DIR="$home/.claude"
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1
      DISABLE_ERROR_REPORTING=1 DISABLE_FEEDBACK_COMMAND=1 CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1
    )
    if [[ -n "$max_out" ]]; then env_cli+=(CLAUDE_CODE_MAX_OUTPUT_TOKENS="$max_out"); fi
    args=("$bin" -p "$prompt" --output-format json)
    if [[ -n "$max_turns" ]]; then args+=(--max-turns "$max_turns"); fi
    if [[ "$continue_last" == 1 ]]; then args+=(--continue); fi
    ;;
  codex)
    bin=$modules/@openai/codex/bin/codex.js
    [[ -f "$bin" ]] || die "no Codex CLI under $modules/@openai/codex"
    codex_home=$home/.codex
    mkdir -p "$codex_home"
    {
      echo "model = \"$model\""
      echo 'model_provider = "kvgate"'
      echo 'approval_policy = "never"'
      echo 'sandbox_mode = "read-only"'
      echo 'check_for_update_on_startup = false'
      echo
      echo '[model_providers.kvgate]'
      echo 'name = "kvgate"'
      echo "base_url = \"$base_url/v1\""
      echo 'wire_api = "responses"'
      echo 'env_key = "KVGATE_API_KEY"'
      echo
      echo '[analytics]'
      echo 'enabled = false'
      echo
      echo '[feedback]'
      echo 'enabled = false'
      echo
      echo '[otel]'
      echo 'exporter = "none"'
      echo 'trace_exporter = "none"'
      echo 'metrics_exporter = "none"'
      echo
      echo '[history]'
      echo 'persistence = "none"'
      echo
      echo '# The plugin catalogue is fetched from the vendor (chatgpt.com, api.github.com) at start.'
      echo '[features]'
      echo 'plugins = false'
    } > "$codex_home/config.toml"
    env_cli=(CODEX_HOME="$codex_home" KVGATE_API_KEY="$api_key")
    args=(node "$bin" exec --skip-git-repo-check --strict-config --color never)
    if [[ "$continue_last" == 1 ]]; then args+=(resume --last); fi
    args+=("$prompt")
    ;;
  qwen)
    bin=$modules/@qwen-code/qwen-code/cli-entry.js
    [[ -f "$bin" ]] || die "no Qwen Code under $modules/@qwen-code/qwen-code"
    mkdir -p "$home/.qwen"
    generation=''
    if [[ -n "$max_out" ]]; then generation=", \"generationConfig\": {\"samplingParams\": {\"max_tokens\": $max_out}}"; fi
    cat > "$home/.qwen/settings.json" <<EOF
{
  "security": { "auth": { "selectedType": "openai" } },
  "model": { "name": "$model"$generation },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false },
  "general": { "enableAutoUpdate": false }
}
EOF
    env_cli=(OPENAI_BASE_URL="$base_url/v1" OPENAI_API_KEY="$api_key" OPENAI_MODEL="$model")
    args=(node "$bin" --output-format json "$prompt")
    if [[ -n "$max_turns" ]]; then args+=(--max-session-turns "$max_turns"); fi
    if [[ "$continue_last" == 1 ]]; then args+=(--continue); fi
    ;;
  opencode)
    # opencode's native build, from its platform package (the wrapper package's bin starts it).
    bin=$(ls "$modules"/opencode-linux-*/bin/opencode 2>/dev/null | head -n1)
    [[ -n "$bin" ]] || die "no opencode binary for this platform under $modules"
    mkdir -p "$home/.config/opencode"
    limit=''
    if [[ -n "$max_out" ]]; then limit=", \"limit\": {\"context\": 32768, \"output\": $max_out}"; fi
    # One OpenAI-compatible provider (bundled in the binary: nothing is installed at start),
    # used for the agent and as the small model (titles, summaries).
    cat > "$home/.config/opencode/opencode.json" <<EOF
{
  "\$schema": "https://opencode.ai/config.json",
  "provider": {
    "kvgate": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "kvgate",
      "options": { "baseURL": "$base_url/v1", "apiKey": "{env:KVGATE_API_KEY}" },
      "models": { "$model": { "name": "$model"$limit } }
    }
  },
  "model": "kvgate/$model",
  "small_model": "kvgate/$model",
  "autoupdate": false,
  "share": "disabled"
}
EOF
    env_cli=(KVGATE_API_KEY="$api_key" OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1
      OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_SHARE=1
      OPENCODE_DISABLE_CLAUDE_CODE=1 OPENCODE_DISABLE_EXTERNAL_SKILLS=1)
    args=("$bin" run --format json --model "kvgate/$model")
    if [[ "$continue_last" == 1 ]]; then args+=(--continue); fi
    args+=("$prompt")
    ;;
  *) die "unknown CLI '$cli' (claude, codex, qwen or opencode)" ;;
esac

{
  echo "cwd: $workdir"
  printf '%s\n' "${env_common[@]}" "${env_cli[@]}" | sed -e "s|=$api_key\$|=<key>|"
  printf '%q ' "${args[@]}"
  echo
} > "$outdir/command.txt"

started=$(date +%s%N)
status=0
(cd "$workdir" && env -i "${env_common[@]}" "${env_cli[@]}" \
  timeout --kill-after=10 "$time_limit" "${args[@]}" </dev/null >"$outdir/stdout.txt" 2>"$outdir/stderr.txt") || status=$?
echo "$status" > "$outdir/exit_code"
elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))
printf '%d.%03d\n' $((elapsed_ms / 1000)) $((elapsed_ms % 1000)) > "$outdir/elapsed_s"
exit 0
