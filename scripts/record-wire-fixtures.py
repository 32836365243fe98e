#!/usr/bin/env python3
"""Records what the pinned llama-server answers to chat-completion requests, streamed and not,
as fixtures for the wire adapters (src/wire): tests/fixtures/wire/<scenario>.json.

A qwen3 model with random weights is synthesized (`kvgate synth`) and served with the
tool-aware template src/gateway/templates/chatml-tools.jinja (--jinja, -c 4096, -np 1) on a
free loopback port (probe_rescue.py's Engine). Random weights write no sensible text, so each scenario steers them the
way the gateway's end-to-end tests do:
  - a logit bias toward common English words (the tokens of " the of and to a in ...") makes
    the model write plain words;
  - a trailing assistant message is a prefill the engine continues; its text is parsed with
    the generated tokens, so a prefilled "<think>…</think>" becomes reasoning_content and a
    prefilled "<tool_call>…</tool_call>" a tool call;
  - a logit bias on <|im_end|> ends the turn at once (finish "stop");
  - a grammar (without tools: the engine refuses grammars with tools) makes the model write
    <think>…</think> and then text token by token, so reasoning streams in pieces.
Every scenario is sent with a fixed seed to /v1/chat/completions twice (non-streamed, then
streamed with stream_options.include_usage), and the same request in the engine's own
Anthropic (/v1/messages) and Responses (/v1/responses) forms, whose answers are kept as a
second reference for the shapes (kvgate's adapters do not use them). The engine's Anthropic
conversion drops logit_bias and grammar, so its answers there are unsteered random text
(or an error when that text does not parse): only their shape is of use.

Usage:
  scripts/record-wire-fixtures.py --server ~/.cache/kvgate/engine/llama.cpp-80fb11a-x86_64/bin/llama-server \\
      [--kvgate build/src/cli/kvgate]
Only the standard library is used. The engine is stopped at the end.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_rescue import Engine, post  # noqa: E402  (the same engine start and JSON POST)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "wire")
TEMPLATE = os.path.join(ROOT, "src", "gateway", "templates", "chatml-tools.jinja")

WORDS = " the of and to a in is it that for on with as was he by at"

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file from the workspace",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                       "required": ["path"]}}}]
ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in TOOLS]
RESPONSES_TOOLS = [dict(type="function", **t["function"]) for t in TOOLS]


def post_stream(port, path, body, timeout=120):
    """(status, [(event name or None, data object)]) of an SSE answer."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    events, name = [], None
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for raw in r:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: ") and line != "data: [DONE]":
                    events.append((name, json.loads(line[6:])))
                    name = None
            return r.status, events
    except urllib.error.HTTPError as e:
        return e.code, [(None, json.loads(e.read()))]


def tokens(port, text):
    _, body = post(port, "/tokenize", {"content": text, "parse_special": True})
    return body["tokens"]


def scenarios(port):
    """name → (description, chat body). Bodies carry no `stream`; it is added per call."""
    words = [[t, 100] for t in tokens(port, WORDS)]
    end = [[tokens(port, "<|im_end|>")[0], 100]]
    system = {"role": "system", "content": "You are terse."}
    ask = {"role": "user", "content": "Say a few words about rivers."}
    weather = {"role": "user", "content": "What is the weather in Paris, and what is in notes.txt?"}
    # Reasoning written token by token: the grammar makes the model write <think>, words,
    # </think>, words; the engine's parser splits them into reasoning_content and content.
    thinking = ('root ::= "<think>\\n" w w w w w "\\n</think>\\n\\n" w w w w w w\n'
                'w ::= " the" | " river" | " flows" | " to" | " sea" | " slowly" | " and"\n')
    return {
        "text_length": ("plain words until max_tokens cuts the reply (finish length)",
                        {"messages": [system, ask], "max_tokens": 12, "logit_bias": words}),
        "text_stop_word": ("plain words until a stop string ends the reply; verbose: true makes the "
                           "engine name it (__verbose.stopping_word)",
                           {"messages": [system, ask], "max_tokens": 40, "logit_bias": words,
                            "stop": [" with", " sea"], "verbose": True}),
        "text_end_of_turn": ("a prefilled answer, then the end-of-turn token (finish stop)",
                             {"messages": [system, ask, {"role": "assistant", "content": "Rivers run to the sea."}],
                              "max_tokens": 8, "logit_bias": end}),
        "reasoning_then_text": ("reasoning then text, written token by token under a grammar (thinking on)",
                                {"messages": [system, ask], "max_tokens": 40, "grammar": thinking,
                                 "chat_template_kwargs": {"enable_thinking": True}}),
        "tool_calls": ("two prefilled tool calls after a sentence, then end of turn (finish tool_calls)",
                       {"messages": [system, weather, {"role": "assistant", "content":
                           "Checking both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                           "{\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n"
                           "{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\", \"limit\": 20}}\n"
                           "</tool_call>"}],
                        "tools": TOOLS, "max_tokens": 8, "logit_bias": end}),
        "tool_call_cut": ("a prefilled tool call the model continues word by word inside its arguments "
                          "until max_tokens cuts it (finish length, arguments not valid JSON)",
                          {"messages": [system, weather, {"role": "assistant", "content":
                              "Reading.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": "
                              "{\"path\": \"notes"}],
                           "tools": TOOLS, "max_tokens": 6, "logit_bias": words}),
    }


def anthropic_body(chat):
    """The same request in Anthropic's form (for the engine's own /v1/messages)."""
    msgs = [m for m in chat["messages"] if m["role"] != "system"]
    body = {"model": "m", "max_tokens": chat["max_tokens"], "messages": msgs,
            "system": next(m["content"] for m in chat["messages"] if m["role"] == "system")}
    for key in ("logit_bias", "chat_template_kwargs"):
        if key in chat:
            body[key] = chat[key]
    if "stop" in chat:
        body["stop_sequences"] = chat["stop"]
    if "tools" in chat:
        body["tools"] = ANTHROPIC_TOOLS
    if chat.get("tool_choice") == "required":
        body["tool_choice"] = {"type": "any"}
    return body


def responses_body(chat):
    """The same request in the Responses form (for the engine's own /v1/responses)."""
    def item(m):
        if m["role"] != "assistant":
            return m
        return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": m["content"]}]}
    body = {"model": "m", "max_output_tokens": chat["max_tokens"],
            "instructions": next(m["content"] for m in chat["messages"] if m["role"] == "system"),
            "input": [item(m) for m in chat["messages"] if m["role"] != "system"]}
    for key in ("logit_bias", "chat_template_kwargs", "stop", "tool_choice", "grammar"):
        if key in chat:
            body[key] = chat[key]
    if "tools" in chat:
        body["tools"] = RESPONSES_TOOLS
    return body


def record(port, name, description, chat):
    seeded = dict(chat, seed=1)
    status, response = post(port, "/v1/chat/completions", seeded)
    s_status, events = post_stream(port, "/v1/chat/completions",
                                   dict(seeded, stream=True, stream_options={"include_usage": True}))
    fixture = {"scenario": name, "description": description, "request": seeded,
               "status": status, "response": response, "stream_status": s_status,
               "chunks": [data for _, data in events]}
    a_body = dict(anthropic_body(chat), seed=1)
    a_status, a_response = post(port, "/v1/messages", a_body)
    _, a_events = post_stream(port, "/v1/messages", dict(a_body, stream=True))
    fixture["engine_anthropic"] = {"request": a_body, "status": a_status, "response": a_response,
                                   "events": [{"event": n, "data": d} for n, d in a_events]}
    r_body = dict(responses_body(chat), seed=1)
    r_status, r_response = post(port, "/v1/responses", r_body)
    _, r_events = post_stream(port, "/v1/responses", dict(r_body, stream=True))
    fixture["engine_responses"] = {"request": r_body, "status": r_status, "response": r_response,
                                   "events": [{"event": n, "data": d} for n, d in r_events]}
    return fixture


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--kvgate", default=os.path.join(ROOT, "build", "src", "cli", "kvgate"))
    opts = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kvgate-wire-")
    model = os.path.join(work, "qwen3.gguf")
    subprocess.run([opts.kvgate, "synth", "--arch", "qwen3", "--out", model], check=True, stdout=subprocess.DEVNULL)
    engine = Engine(opts.server, model, TEMPLATE, os.path.join(work, "engine.log"))
    os.makedirs(OUT_DIR, exist_ok=True)
    try:
        for name, (description, chat) in scenarios(engine.port).items():
            fixture = record(engine.port, name, description, chat)
            msg = fixture["response"].get("choices", [{}])[0]
            print(f"  {name:22s} {fixture['status']} {msg.get('finish_reason')} "
                  f"{len(fixture['chunks'])} chunks")
            with open(os.path.join(OUT_DIR, f"{name}.json"), "w") as f:
                json.dump(fixture, f, indent=1, ensure_ascii=False)
                f.write("\n")
    finally:
        engine.stop()
    os.remove(model)
    print(f"wrote {OUT_DIR}; engine log in {work}")


if __name__ == "__main__":
    sys.exit(main())
