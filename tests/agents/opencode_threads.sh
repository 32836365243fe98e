#!/usr/bin/env bash
# Prompt tokens of opencode's recorded agent turns 1 and 2 (tests/fixtures/agents/opencode) through
# `kvgate serve` after its title request under the same x-session-id, under an id of their own,
# and sent straight to the pinned engine: the figures in docs/GATEWAY.md ("What a client's id means").
#
#   tests/agents/opencode_threads.sh KVGATE_BIN tests/fixtures/agents/opencode
set -euo pipefail
kv=$1 fx=$2
source "$(dirname "$0")/engine_and_gateway.sh"
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
