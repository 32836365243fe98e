#!/usr/bin/env bash
# Prompt tokens of opencode's recorded agent request (tests/fixtures/agents/opencode/run1-002.json,
# 10 tools) sent straight to the pinned engine and through `kvgate serve`, and whether the engine's
# render of what kvgate sent is the render of the client's own text: the tool-schema key-order
# figures in docs/GATEWAY.md.
#
#   tests/agents/opencode_tool_order.sh KVGATE_BIN tests/fixtures/agents/opencode
set -euo pipefail
kv=$1 fx=$2
source "$(dirname "$0")/engine_and_gateway.sh"
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
