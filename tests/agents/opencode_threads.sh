#!/usr/bin/env bash
# Prompt tokens of opencode's recorded agent turns 1 and 2 (tests/fixtures/agents/opencode) through
# `kvgate serve` after its title request under the same x-session-id, under an id of their own,
# and sent straight to the pinned engine: the figures in docs/GATEWAY.md ("What a client's id means").
#
#   tests/agents/opencode_threads.sh KVGATE_BIN tests/fixtures/agents/opencode
set -euo pipefail
kv=$1 fx=$2
w=$(mktemp -d)
server=$(ls -d ~/.cache/kvgate/engine/llama.cpp-*/bin/llama-server | head -1)
"$kv" synth --preset tiny-qwen3 --out "$w/model.gguf" >/dev/null
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
ep=$(free_port); gp=$(free_port)
"$server" -m "$w/model.gguf" --host 127.0.0.1 --port $ep -c 32768 -np 1 --jinja -t 2 --api-key K >"$w/engine.log" 2>&1 &
epid=$!
trap 'kill $epid ${gpid:-} 2>/dev/null || true' EXIT
for _ in $(seq 120); do curl -sf http://127.0.0.1:$ep/health >/dev/null && break; sleep 0.5; done
"$kv" serve --upstream http://127.0.0.1:$ep --upstream-key K --listen 127.0.0.1:$gp --state-dir none >"$w/gw.log" 2>&1 &
gpid=$!
for _ in $(seq 120); do curl -sf http://127.0.0.1:$gp/health >/dev/null && break; sleep 0.5; done
python3 - "$fx" $ep $gp <<'PY'
import json, sys, urllib.request
fx, ep, gp = sys.argv[1], sys.argv[2], sys.argv[3]
def body(name):
    b = json.load(open(f"{fx}/{name}"))["request"]["body"]
    b["stream"] = False; b.pop("stream_options", None); b["max_tokens"] = 1
    return b
def post(port, b, sid=None, key=None):
    h = {"Content-Type": "application/json"}
    if sid: h["x-session-id"] = sid
    if key: h["Authorization"] = "Bearer " + key
    r = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(b).encode(), h), timeout=900)
    return json.load(r)["usage"]["prompt_tokens"]
title, a1, a2 = body("run1-001.json"), body("run1-002.json"), body("continue-001.json")
def reply_post(port, b, sid):
    h = {"Content-Type": "application/json", "x-session-id": sid}
    r = json.load(urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(b).encode(), h), timeout=900))
    return r["usage"]["prompt_tokens"], r["choices"][0]["message"]
def turn2(b1, reply):
    b = dict(a2); m = list(b1["messages"]) + [{"role": "assistant", "content": reply.get("content") or ""}] + [a2["messages"][-1]]
    b["messages"] = m; return b
a1["max_tokens"] = 16
sid = "ses_measure"
t_title = post(gp, title, sid)
t1, r1 = reply_post(gp, a1, sid)
b2 = turn2(a1, r1)
t2 = post(gp, b2, sid)
o1, ro = reply_post(gp, a1, "ses_alone")
o2 = post(gp, turn2(a1, ro), "ses_alone")
one = lambda b: dict(b, max_tokens=1)
alone = [post(ep, one(a1), key="K"), post(ep, one(b2), key="K")]
print(f"title through kvgate: {t_title}")
print(f"agent turn 1: through kvgate after the title {t1}, through kvgate under an id of its own {o1}, alone {alone[0]}")
print(f"agent turn 2: through kvgate after the title {t2}, through kvgate under an id of its own {o2}, alone {alone[1]}")
PY
