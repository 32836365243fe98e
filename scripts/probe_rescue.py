#!/usr/bin/env python3
"""Probes the pinned llama-server for the faults kvgate rescues, and records what it answers.

For every chat template given with --template NAME=PATH it starts the engine on a synthesized
model (`kvgate synth`), then:

  history   sends each malformed conversation of HISTORY_FAULTS straight to
            /v1/chat/completions (max_tokens 1, end-of-turn forced with logit_bias, so only the
            history is judged) and writes tests/fixtures/history_faults/<fault>.json with the
            exact request and the engine's status and body per template;
  outputs   for the tool-call fixtures in tests/fixtures/tool_calls/<family>.json that name the
            template, makes the engine parse the case's raw text as if the model had produced
            it (the text is sent as a trailing assistant message, which the engine continues
            with one forced end-of-turn token and then parses), and stores the answer in the
            case's "engine" object;
  random    (--random N, first template only) sends N chat requests with tools declared and a
            fixed seed each, counts the engine's output-parse rejections, and for the first
            ones replays the rendered prompt as a streamed raw /completion with the same seed,
            recording whether the text the engine streamed before failing is reproduced.

Usage:
  scripts/probe_rescue.py --server ~/.cache/kvgate/engine/llama.cpp-80fb11a-x86_64/bin/llama-server \
      --kvgate build/src/cli/kvgate \
      --template chatml-tools=src/gateway/templates/chatml-tools.jinja \
      --template Qwen-Qwen3-0.6B=<llama.cpp>/models/templates/Qwen-Qwen3-0.6B.jinja ... \
      [--random 24]
Only the standard library is used. Engines listen on a free loopback port and are stopped.
"""
import argparse
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HISTORY_DIR = os.path.join(ROOT, "tests", "fixtures", "history_faults")
TOOL_DIR = os.path.join(ROOT, "tests", "fixtures", "tool_calls")

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}]

BASE = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function", "function": {
        "name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "{\"temp\": 18}"},
    {"role": "user", "content": "And in Rome?"},
]
CALL = 2  # index of the assistant message with the tool call
RESULT = 3  # index of its tool result


def args_fault(value):
    def f(m, t):
        m[CALL]["tool_calls"][0]["function"]["arguments"] = value
    return f


def drop_key(path_fn, key):
    def f(m, t):
        path_fn(m, t).pop(key, None)
    return f


def set_key(path_fn, key, value):
    def f(m, t):
        path_fn(m, t)[key] = value
    return f


call0 = lambda m, t: m[CALL]["tool_calls"][0]
fn0 = lambda m, t: m[CALL]["tool_calls"][0]["function"]
res = lambda m, t: m[RESULT]
tool0 = lambda m, t: t[0]
tfn0 = lambda m, t: t[0]["function"]


def insert(index, message):
    def f(m, t):
        m.insert(index, message)
    return f


def insert_many(index, messages):
    def f(m, t):
        m[index:index] = messages
    return f


def duplicate_call(m, t):
    m[CALL]["tool_calls"].append(copy.deepcopy(m[CALL]["tool_calls"][0]))
    m.insert(RESULT + 1, copy.deepcopy(m[RESULT]))


def unwrap_tool_calls(m, t):
    m[CALL]["tool_calls"] = m[CALL]["tool_calls"][0]


def replace_list(new_messages):
    def f(m, t):
        m[:] = new_messages
    return f


# fault name -> (description, mutation of (messages, tools))
HISTORY_FAULTS = {
    "control": ("well-formed conversation (reference)", lambda m, t: None),
    "args_truncated_object": ("arguments cut off inside a string value", args_fault("{\"city\": \"Paris\", \"unit\": \"cel")),
    "args_truncated_brace": ("arguments are just \"{\"", args_fault("{")),
    "args_empty_string": ("arguments are an empty string (a call without parameters)", args_fault("")),
    "args_not_json": ("arguments are not JSON at all", args_fault("city=Paris")),
    "args_single_quotes": ("arguments use Python-style single quotes", args_fault("{'city': 'Paris'}")),
    "args_trailing_comma": ("arguments have a trailing comma", args_fault("{\"city\": \"Paris\",}")),
    "args_json_array": ("arguments are a JSON array", args_fault("[\"Paris\"]")),
    "args_json_string": ("arguments are a JSON string", args_fault("\"Paris\"")),
    "args_json_number": ("arguments are a JSON number", args_fault("42")),
    "args_json_null_text": ("arguments are the text null", args_fault("null")),
    "args_double_encoded": ("arguments are a JSON string holding the JSON object", args_fault("\"{\\\"city\\\": \\\"Paris\\\"}\"")),
    "args_null": ("arguments is JSON null", args_fault(None)),
    "args_missing": ("function has no arguments key", drop_key(fn0, "arguments")),
    "args_object": ("arguments sent as an object instead of a string", args_fault({"city": "Paris"})),
    "call_id_missing": ("tool call without id", drop_key(call0, "id")),
    "call_id_null": ("tool call id is null", set_key(call0, "id", None)),
    "call_type_missing": ("tool call without type", drop_key(call0, "type")),
    "call_type_other": ("tool call type is not \"function\"", set_key(call0, "type", "custom")),
    "call_name_missing": ("tool call function without name", drop_key(fn0, "name")),
    "call_name_unknown": ("tool call names a tool that is not declared", set_key(fn0, "name", "get_time")),
    "tool_calls_null": ("assistant with content and tool_calls null", insert(4, {"role": "assistant", "content": "Checking.", "tool_calls": None})),
    "tool_calls_empty": ("assistant with content null and tool_calls []", insert(4, {"role": "assistant", "content": None, "tool_calls": []})),
    "tool_calls_object": ("tool_calls is one object, not a list", unwrap_tool_calls),
    "result_orphan": ("tool result whose tool_call_id matches no call", set_key(res, "tool_call_id", "call_9")),
    "result_without_any_call": ("tool result with no assistant call before it", replace_list([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "tool", "tool_call_id": "call_0", "content": "{\"temp\": 18}"},
        {"role": "user", "content": "And in Rome?"}])),
    "result_id_missing": ("tool result without tool_call_id", drop_key(res, "tool_call_id")),
    "result_id_null": ("tool result with tool_call_id null", set_key(res, "tool_call_id", None)),
    "result_id_number": ("tool result with a numeric tool_call_id", set_key(res, "tool_call_id", 0)),
    "result_content_object": ("tool result content is a JSON object", set_key(res, "content", {"temp": 18})),
    "result_content_null": ("tool result content is null", set_key(res, "content", None)),
    "result_content_array": ("tool result content is an array of numbers", set_key(res, "content", [18, 19])),
    "result_missing_for_call": ("assistant call never answered, user speaks next", lambda m, t: m.pop(RESULT)),
    "assistant_empty_string": ("empty assistant turn (content \"\") between user turns", insert(2, {"role": "assistant", "content": ""})),
    "assistant_content_null": ("assistant turn with content null and no tool calls", insert(2, {"role": "assistant", "content": None})),
    "assistant_no_content": ("assistant turn with neither content nor tool_calls", insert(2, {"role": "assistant"})),
    "assistant_whitespace": ("assistant turn with whitespace only", insert(2, {"role": "assistant", "content": "  \n"})),
    "reasoning_content_null": ("assistant with reasoning_content null", set_key(lambda m, t: m[CALL], "reasoning_content", None)),
    "message_name_null": ("user message with name null", set_key(lambda m, t: m[1], "name", None)),
    "content_part_no_type": ("content part without type", set_key(lambda m, t: m[1], "content", [{"text": "What is the weather in Paris?"}])),
    "consecutive_user": ("two user turns in a row", insert(2, {"role": "user", "content": "Please hurry."})),
    "consecutive_assistant": ("two assistant turns in a row (not at the end)", insert_many(4, [
        {"role": "assistant", "content": "It is 18 degrees."}, {"role": "assistant", "content": "Anything else?"}])),
    "system_not_first": ("system message in the middle", insert(4, {"role": "system", "content": "Be brief."})),
    "duplicate_call_ids": ("two calls with the same id", duplicate_call),
    "trailing_assistant_tool_call": ("conversation ends with an assistant tool call", lambda m, t: m.__delitem__(slice(RESULT, None))),
    "two_trailing_assistants": ("conversation ends with two assistant turns", lambda m, t: m.extend([{"role": "assistant", "content": "One."}, {"role": "assistant", "content": "Two."}])),
    "tool_description_null": ("tool description is null", set_key(tfn0, "description", None)),
    "tool_description_missing": ("tool without description", drop_key(tfn0, "description")),
    "tool_description_number": ("tool description is a number", set_key(tfn0, "description", 7)),
    "tool_parameters_null": ("tool parameters null", set_key(tfn0, "parameters", None)),
    "tool_parameters_missing": ("tool without parameters", drop_key(tfn0, "parameters")),
    "tool_name_missing": ("tool function without name", drop_key(tfn0, "name")),
    "tool_type_missing": ("tool without type", drop_key(tool0, "type")),
    "tool_function_missing": ("tool without function object (flat {name, parameters})", lambda m, t: t.__setitem__(0, {"type": "function", "name": "get_weather", "parameters": TOOLS[0]["function"]["parameters"]})),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body, timeout=120):
    data = json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"raw": raw.decode("utf-8", "replace")}


def post_stream(port, path, body, timeout=120):
    """Returns (status, list of decoded SSE data objects)."""
    data = json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"})
    events = []
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for line in r:
                line = line.decode("utf-8", "replace").rstrip("\n")
                if line.startswith("data: ") and line != "data: [DONE]":
                    events.append(json.loads(line[6:]))
            return r.status, events
    except urllib.error.HTTPError as e:
        return e.code, [json.loads(e.read())]


class Engine:
    def __init__(self, server, model, template, log_path):
        self.port = free_port()
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [server, "-m", model, "-c", "4096", "-np", "1", "--host", "127.0.0.1", "--port",
             str(self.port), "--jinja", "--chat-template-file", template],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"engine exited: see {log_path}")
            time.sleep(0.3)
        raise RuntimeError("engine did not become ready")

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def answer(status, body):
    """The part of an engine answer worth keeping in a fixture."""
    if status == 200 and "choices" in body:
        msg = body["choices"][0].get("message", {})
        return {"status": status, "finish_reason": body["choices"][0].get("finish_reason"),
                "message": {k: msg[k] for k in ("content", "reasoning_content", "tool_calls") if k in msg}}
    return {"status": status, "body": body}


def end_of_turn_id(port):
    _, tok = post(port, "/tokenize", {"content": "<|im_end|>", "parse_special": True})
    return tok["tokens"][0]


def probe_history(port, template_name, eot, results):
    for name, (description, mutate) in HISTORY_FAULTS.items():
        messages, tools = copy.deepcopy(BASE), copy.deepcopy(TOOLS)
        mutate(messages, tools)
        request = {"messages": messages, "tools": tools, "max_tokens": 1, "seed": 1,
                   "logit_bias": [[eot, 100]]}
        status, body = post(port, "/v1/chat/completions", request)
        entry = results.setdefault(name, {"fault": name, "description": description,
                                          "request": request, "engine": {}})
        entry["engine"][template_name] = answer(status, body)
        summary = body.get("error", {}).get("message", "")[:90] if status != 200 else "ok"
        print(f"  {name:32s} {status} {summary}")


def probe_outputs(port, template_name, eot, tools):
    for fname in sorted(os.listdir(TOOL_DIR)):
        path = os.path.join(TOOL_DIR, fname)
        family = json.load(open(path))
        if template_name not in family.get("engine_templates", []):
            continue
        for case in family["cases"]:
            request = {"messages": [{"role": "user", "content": "Help me with my task."},
                                    {"role": "assistant", "content": case["raw"]}],
                       "tools": tools, "max_tokens": 1, "seed": 1, "logit_bias": [[eot, 100]]}
            status, body = post(port, "/v1/chat/completions", request)
            case.setdefault("engine", {})[template_name] = answer(status, body)
            summary = body.get("error", {}).get("message", "")[:80] if status != 200 else \
                f"ok, {len(body['choices'][0]['message'].get('tool_calls') or [])} calls"
            print(f"  {family['family']}/{case['name']:36s} {status} {summary}")
        with open(path, "w") as f:
            json.dump(family, f, indent=2, ensure_ascii=False)
            f.write("\n")


def stream_text(events):
    text, tokens, error = "", [], None
    for e in events:
        if "error" in e:
            error = e["error"]
            continue
        text += e.get("content", "")
        tokens += e.get("tokens", [])
    return text, tokens, error


def chat_stream_text(events):
    text, error = "", None
    for e in events:
        if "error" in e:
            error = e["error"]
            continue
        for c in e.get("choices", []):
            d = c.get("delta", {})
            text += (d.get("reasoning_content") or "") + (d.get("content") or "")
    return text, error


def probe_random(port, n, eot, out_path):
    """Each seed: warm the slot with the previous turn (as a live session would have it) and
    send the turn; warm again and send it streamed, to see the text the engine generated;
    then replay the rendered prompt as a streamed raw /completion with the same seed, three
    ways: right away (the whole prompt is cached), after warming the previous turn again
    (the slot is as it was before the turn), and with cache_prompt false."""
    conversation = {"messages": BASE, "tools": TOOLS}
    previous_turn = {"messages": BASE[:-1], "tools": TOOLS, "max_tokens": 1, "seed": 1,
                     "logit_bias": [[eot, 100]]}
    rejected = 0
    same = {"cached": 0, "rewarmed": 0, "uncached": 0}
    examples = []
    for seed in range(1, n + 1):
        request = dict(conversation, seed=seed, max_tokens=48)
        post(port, "/v1/chat/completions", previous_turn)
        status, body = post(port, "/v1/chat/completions", request)
        post(port, "/v1/chat/completions", previous_turn)
        _, chat_events = post_stream(port, "/v1/chat/completions", dict(request, stream=True))
        chat_text, chat_error = chat_stream_text(chat_events)
        _, rendered = post(port, "/apply-template", request)
        raw_request = {"prompt": rendered["prompt"], "seed": seed, "n_predict": 48,
                       "stream": True, "return_tokens": True}
        texts = {}
        _, ev = post_stream(port, "/completion", raw_request)
        texts["cached"], raw_tokens, raw_error = stream_text(ev)
        post(port, "/v1/chat/completions", previous_turn)
        _, ev = post_stream(port, "/completion", raw_request)
        texts["rewarmed"], _, _ = stream_text(ev)
        _, ev = post_stream(port, "/completion", dict(raw_request, cache_prompt=False))
        texts["uncached"], _, _ = stream_text(ev)
        for k in same:
            same[k] += texts[k] == chat_text
        if status != 200:
            rejected += 1
        if status != 200 and len(examples) < 4:
            examples.append({
                "request": request, "engine": answer(status, body),
                "chat_stream": {"text_before_error": chat_text, "error": chat_error},
                "raw_completion_request": {k: v for k, v in raw_request.items() if k != "prompt"},
                "raw_completion": {"text": texts["cached"], "tokens": raw_tokens, "error": raw_error},
                "reproduced": {k: texts[k] == chat_text for k in texts},
            })
        print(f"  seed {seed}: {status}; replay reproduces the streamed text: "
              + ", ".join(f"{k} {texts[k] == chat_text}" for k in texts))
    summary = {"description": "Chat requests with tools declared, sent straight to the pinned engine on a "
                              "synthesized random-weight qwen3 model (chatml-tools template), one seed each. "
                              "Before each request the previous turn is sent (max_tokens 1) so the slot holds "
                              "its prompt, as in a live session; the streamed request repeats the turn after "
                              "the same warm-up. Replays: /completion with the /apply-template prompt, the same "
                              "seed and n_predict, streamed: 'cached' right after the turn (the whole prompt is "
                              "in the slot), 'rewarmed' after sending the previous turn again (the slot as it "
                              "was before the turn), 'uncached' with cache_prompt false.",
               "requests": n, "rejected_by_output_parser": rejected,
               "replay_reproduced_streamed_text": same, "examples": examples}
    with open(out_path, "w") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"  {rejected}/{n} rejected; replay reproduced {same} of {n}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--kvgate", default=os.path.join(ROOT, "build", "src", "cli", "kvgate"))
    ap.add_argument("--template", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--random", type=int, default=0)
    ap.add_argument("--random-only", action="store_true", help="skip the history and output probes")
    opts = ap.parse_args()

    work = tempfile.mkdtemp(prefix="kvgate-probe-")
    model = os.path.join(work, "qwen3.gguf")
    subprocess.run([opts.kvgate, "synth", "--arch", "qwen3", "--out", model], check=True,
                   stdout=subprocess.DEVNULL)
    tools_fixture = json.load(open(os.path.join(TOOL_DIR, "tools.json")))["tools"]
    history = {}
    for i, spec in enumerate(opts.template):
        name, path = spec.split("=", 1)
        print(f"template {name}")
        engine = Engine(opts.server, model, path, os.path.join(work, f"{name}.log"))
        try:
            eot = end_of_turn_id(engine.port)
            if not opts.random_only:
                probe_history(engine.port, name, eot, history)
                probe_outputs(engine.port, name, eot, tools_fixture)
            if i == 0 and opts.random:
                probe_random(engine.port, opts.random, eot, os.path.join(TOOL_DIR, "synth_random.json"))
        finally:
            engine.stop()
    for name, entry in history.items():
        path = os.path.join(HISTORY_DIR, f"{name}.json")
        with open(path, "w") as f:
            json.dump(entry, f, indent=2, ensure_ascii=False)
            f.write("\n")
    print(f"wrote {len(history)} history fixtures; engine logs in {work}")


if __name__ == "__main__":
    sys.exit(main())
