#!/usr/bin/env bash
# Prompt tokens of opencode's recorded agent request (tests/fixtures/agents/opencode/run1-002.json,
# 11 tools) sent straight to the pinned engine and through `kvgate serve`, and whether the engine's
# render of what kvgate sent is the render of the client's own text: the tool-schema key-order
# figures in docs/GATEWAY.md.
#
#   tests/agents/opencode_tool_order.sh KVGATE_BIN tests/fixtures/agents/opencode
set -euo pipefail
kv=$1 fx=$2
w=$(mktemp -d)
server=$(ls -d ~/.cache/kvgate/engine/llama.cpp-*/bin/llama-server | head -1)
"$kv" synth --preset tiny-qwen3 --out "$w/model.gguf" >/dev/null
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
ep=$(free_port); gp=$(free_port)
"$server" -m "$w/model.gguf" --host 127.0.0.1 --port $ep -c 32768 -np 1 --jinja -t 2 --api-key K >"$w/engine.log" 2>&1 &
epid=$!
trap 'kill $epid ${gpid:-} 2>/dev/null || true; rm -rf "$w"' EXIT
for _ in $(seq 120); do curl -sf http://127.0.0.1:$ep/health >/dev/null && break; sleep 0.5; done
"$kv" serve --upstream http://127.0.0.1:$ep --upstream-key K --listen 127.0.0.1:$gp --state-dir none >"$w/gw.log" 2>&1 &
gpid=$!
for _ in $(seq 120); do curl -sf http://127.0.0.1:$gp/health >/dev/null && break; sleep 0.5; done
python3 - "$fx" $ep $gp <<'PY'
import json, sys, urllib.request
fx, ep, gp = sys.argv[1], sys.argv[2], sys.argv[3]
def post(port, path, b, sid=None):
    h = {"Content-Type": "application/json", "Authorization": "Bearer K"}
    if sid: h["x-session-id"] = sid
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(b).encode(), h)
    return json.load(urllib.request.urlopen(req, timeout=900))
b = json.load(open(f"{fx}/run1-002.json"))["request"]["body"]   # key order kept, as opencode wrote it
b["stream"] = False; b.pop("stream_options", None); b["max_tokens"] = 1
render = lambda body: post(ep, "/apply-template", {"messages": body["messages"], "tools": body["tools"]})["prompt"]
ordered = render(b)
sorted_body = json.loads(json.dumps(b, sort_keys=True))
resorted = render(sorted_body)
count = lambda text: len(post(ep, "/tokenize", {"content": text})["tokens"])
# kvgate sends thinking off (its default): the engine alone is asked the same way.
off = {"enable_thinking": False}
alone = post(ep, "/v1/chat/completions", dict(b, chat_template_kwargs=off))["usage"]["prompt_tokens"]
alone_sorted = post(ep, "/v1/chat/completions", dict(sorted_body, chat_template_kwargs=off))["usage"]["prompt_tokens"]
through = post(gp, "/v1/chat/completions", b, "ses_order")["usage"]["prompt_tokens"]
print(f"tools: {len(b['tools'])}; render as written {count(ordered)} tokens, with sorted keys {count(resorted)} "
      f"(renders differ: {ordered != resorted})")
print(f"prompt tokens, thinking off: straight to the engine {alone} (its keys sorted: {alone_sorted}), "
      f"through kvgate {through}")
PY
