#!/usr/bin/env bash
# Takes the status page screenshots in docs/images/: serves the gateway on the built-in default
# model (kvgate up, on a free port in 18900-18999, --state-dir none), replays the first 8
# requests of tests/fixtures/traces/agent-timestamp.jsonl.zst, three short conversations, and
# a 3-turn one named "review" (X-Session-Id) whose turn 3 edits the first user message, then shoots the page
# with that conversation's turn 3 in the inspector using headless Chromium:
#   docs/images/status-desktop.png  1280x1980, light
#   docs/images/status-dark.png     1280x1980, dark (prefers-color-scheme: dark)
#   docs/images/status-phone.png    390x3700, light
# (heights: the whole page, down to the inspector, with a little room to spare), then prints
# that turn's JSON and the page's size and load time (scripts/status-page-bench.sh).
# Needs a built kvgate (KVGATE_BIN=/path/to/kvgate, default build/src/cli/kvgate of this
# checkout) and its engine, curl, python3 and chromium (CHROMIUM=/path, default chromium).
# Another `kvgate up` serving the built-in default model holds its lock: stop that one first.
# Usage: scripts/status-screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."

KVGATE_BIN="${KVGATE_BIN:-build/src/cli/kvgate}"
CHROMIUM="${CHROMIUM:-chromium}"
trace=tests/fixtures/traces/agent-timestamp.jsonl.zst
out=docs/images

log() { printf '[screenshots] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ -x "$KVGATE_BIN" ]] || die "no kvgate binary at $KVGATE_BIN (build it, or set KVGATE_BIN=/path/to/kvgate)"
[[ -r "$trace" ]] || die "no trace at $trace"
for tool in curl python3 "$CHROMIUM"; do
  command -v "$tool" >/dev/null || die "$tool not found"
done

tmp="$(mktemp -d)"
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# A free port in 18900-18999: nothing answers a connect on it.
port=""
for p in $(seq 18900 18999); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[[ -n "$port" ]] || die "no free port in 18900-18999"
base="http://127.0.0.1:$port"

log "kvgate up on 127.0.0.1:$port (log: $tmp/up.log)"
: >"$tmp/up.log"  # exists before the first grep below
"$KVGATE_BIN" up --listen "127.0.0.1:$port" --state-dir none --ctx 8192 --log-dir "$tmp/logs" \
  >"$tmp/up.log" 2>&1 &
pid=$!
for ((i = 0; i < 240; i++)); do
  grep -q 'gateway: http://' "$tmp/up.log" && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/up.log" >&2; pid=""; die "kvgate up exited"; }
  sleep 0.5
done
grep -q 'gateway: http://' "$tmp/up.log" || { cat "$tmp/up.log" >&2; die "gateway not up after 120 s"; }

# POST a body (on stdin) to /v1/chat/completions; extra arguments are curl headers.
chat() { curl -sS --fail-with-body --max-time 300 -H 'Content-Type: application/json' "$@" \
           --data-binary @- "$base/v1/chat/completions"; }

log "replaying the first 8 requests of $trace"
zstd -dcq "$trace" >"$tmp/trace.jsonl"
python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1], encoding="utf-8"):
    body = json.loads(line)
    if "_meta" in body:
        continue
    body["max_tokens"] = 16
    body["stream"] = False
    print(json.dumps(body))
    n += 1
    if n == 8:
        break
' "$tmp/trace.jsonl" >"$tmp/replay.jsonl"
while IFS= read -r body; do
  printf '%s' "$body" | chat >/dev/null
done <"$tmp/replay.jsonl"

log "conversation \"review\": 3 turns, turn 3 edits the first user message"
# JSON string of $1 (the replies may hold any character).
jstr() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"; }
msg() { printf '{"role":"%s","content":%s}' "$1" "$(jstr "$2")"; }
content() { python3 -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["message"]["content"] or "")'; }
turn() { printf '{"model":"default","max_tokens":16,"stream":false,"messages":[%s]}' "$1" |
           chat -H 'X-Session-Id: review' | content; }
sys_msg="$(msg system "You review builds.")"
h1="$sys_msg,$(msg user "The build is green, ship it.")"
r1="$(turn "$h1")"
h2="$h1,$(msg assistant "$r1"),$(msg user "next step?")"
r2="$(turn "$h2")"
h3="$sys_msg,$(msg user "The build is red, ship it."),$(msg assistant "$r1"),$(msg user "next step?")"
h3="$h3,$(msg assistant "$r2"),$(msg user "and then?")"
turn "$h3" >/dev/null

log "three more conversations of two turns each"
for topic in "the parser" "the release notes" "the flaky test"; do
  a1="$(msg system "You help with $topic."),$(msg user "What is wrong with $topic?")"
  b1="$(printf '{"max_tokens":16,"stream":false,"messages":[%s]}' "$a1" | chat | content)"
  printf '{"max_tokens":16,"stream":false,"messages":[%s]}' "$a1,$(msg assistant "$b1"),$(msg user "Fix it.")" |
    chat >/dev/null
done

sid="$(curl -sS --fail "$base/kvgate/v1/sessions" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(next((s["id"] for s in j["data"] if str(s.get("id", "")).endswith("review")), ""))
')"
[[ -n "$sid" ]] || die "no session ending in \"review\" in /kvgate/v1/sessions"
url="$base/?session=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$sid")&turn=3"
log "session $sid; page $url"

mkdir -p "$out"
n=0
# shoot FILE WIDTH,HEIGHT [chromium flags]
shoot() {
  local file=$1 size=$2; shift 2
  n=$((n + 1))
  rm -f "$file"
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --disable-dev-shm-usage \
    --user-data-dir="$tmp/chrome-$n" --virtual-time-budget=6000 --window-size="$size" \
    --screenshot="$file" "$@" "$url" >"$tmp/chrome-$n.log" 2>&1 || true
  [[ -s "$file" ]] || { cat "$tmp/chrome-$n.log" >&2; die "chromium wrote no $file"; }
}
shoot "$out/status-desktop.png" 1280,1980
# --force-dark-mode makes prefers-color-scheme: dark match (as does --blink-settings=preferredColorScheme=0).
shoot "$out/status-dark.png" 1280,1980 --force-dark-mode
shoot "$out/status-phone.png" 390,3700

for f in "$out/status-desktop.png" "$out/status-dark.png" "$out/status-phone.png"; do
  printf '%s\t%s bytes\n' "$f" "$(wc -c <"$f")"
done
log "the inspected turn as JSON (GET /kvgate/v1/sessions/$sid/turns/3)"
curl -sS --fail "$base/kvgate/v1/sessions/$sid/turns/3"
echo
log "page size and load time"
scripts/status-page-bench.sh "$base" "" 5
