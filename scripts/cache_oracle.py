#!/usr/bin/env python3
"""Measures whether one API key can read another key's prompt cache through kvgate.

Starts `kvgate up` (the default model unless --model: a copy of it when another kvgate serves
it) with two client keys, A and B, and the
engine's slots (--parallel). Per round:

  1. A holds a conversation of --turns turns on a system prompt of --prefix-words words that
     only A was given (a new one each round); the engine's cached_tokens of A's turns 2.. are
     A's own reuse;
  2. B sends A's system prompt with a question of its own, and a system prompt of the same
     length that nobody sent before with the same question, in turn order alternating by
     round; B's cached_tokens and latency for each.

Printed: per round and as medians, B's cached tokens for A's prefix and for the new one, the
latency ratio (A's prefix / new prefix: well under 1 is an oracle), and A's cached tokens per
turn. The figures are the engine's (usage.prompt_tokens_details.cached_tokens as kvgate
relays it). Not a test: timings depend on the machine; compare runs on the same one.

Usage: scripts/cache_oracle.py [--kvgate build/src/cli/kvgate] [--rounds 5] [--parallel 2]
                               [--prefix-words 600] [--turns 5] [--json OUT]
Only the standard library is used; kvgate listens on a free loopback port and is stopped.
"""
import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

WORDS = ("river stone light paper window garden silver morning number letter orange bridge "
         "table mountain pencil winter yellow market engine forest purple violin rocket "
         "castle shadow planet thunder candle basket mirror needle harbor meadow lantern "
         "falcon marble copper velvet island desert canyon glacier meteor comet quartz").split()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, key, body, timeout=600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        answer = json.loads(r.read())
    return answer, (time.perf_counter() - t0) * 1000.0


def usage(answer):
    u = answer.get("usage", {})
    return u.get("prompt_tokens", 0), u.get("prompt_tokens_details", {}).get("cached_tokens", 0)


def text(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


def chat(messages, max_tokens=2):
    return {"messages": messages, "max_tokens": max_tokens, "temperature": 0}


def wait_ready(port, proc, timeout=300):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"kvgate up exited with {proc.returncode} (its output: up.log in the temporary folder)")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200 and json.loads(r.read()).get("status") == "ok":
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.5)
    raise SystemExit("kvgate up did not become healthy")


def a_conversation(port, rng, system, turns):
    messages = [{"role": "system", "content": system}]
    cached = []
    for t in range(turns):
        messages.append({"role": "user", "content": f"turn {t}: " + text(rng, 12)})
        answer, _ = post(port, "key-a", chat(messages))
        prompt, hit = usage(answer)
        if t > 0:
            cached.append({"turn": t + 1, "prompt_tokens": prompt, "cached_tokens": hit})
        messages.append({"role": "assistant", "content": answer["choices"][0]["message"].get("content") or ""})
    return cached


def b_probe(port, system, question):
    answer, ms = post(port, "key-b", chat([{"role": "system", "content": system}, {"role": "user", "content": question}]))
    prompt, hit = usage(answer)
    return {"prompt_tokens": prompt, "cached_tokens": hit, "ms": ms}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kvgate", default="build/src/cli/kvgate")
    ap.add_argument("--model", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--ctx", default="16384")
    ap.add_argument("--prefix-words", type=int, default=600)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kvgate-oracle-")
    keys = os.path.join(tmp, "keys")
    with open(keys, "w") as f:
        f.write("key-a\nkey-b\n")
    os.chmod(keys, 0o600)
    port = free_port()
    cmd = [a.kvgate, "up"] + ([a.model] if a.model else []) + [
        "--listen", f"127.0.0.1:{port}", "--api-key-file", keys, "--parallel", str(a.parallel), "--ctx", a.ctx,
        "--state-dir", os.path.join(tmp, "state"), "--log-dir", os.path.join(tmp, "logs")]
    log = open(os.path.join(tmp, "up.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    rng = random.Random(a.seed)
    rounds = []
    try:
        wait_ready(port, proc)
        for r in range(a.rounds):
            secret = text(rng, a.prefix_words)
            fresh = text(rng, a.prefix_words)
            a_turns = a_conversation(port, rng, secret, a.turns)
            question = f"round {r}: " + text(rng, 8)
            if r % 2 == 0:
                seen, new = b_probe(port, secret, question), b_probe(port, fresh, question)
            else:
                new, seen = b_probe(port, fresh, question), b_probe(port, secret, question)
            row = {"round": r + 1, "b_a_prefix": seen, "b_new_prefix": new, "ratio": seen["ms"] / new["ms"],
                   "a_turns": a_turns}
            rounds.append(row)
            print(f"round {r + 1}: B on A's prefix {seen['cached_tokens']}/{seen['prompt_tokens']} cached, "
                  f"{seen['ms']:.0f} ms; on a new prefix {new['cached_tokens']}/{new['prompt_tokens']}, "
                  f"{new['ms']:.0f} ms; ratio {row['ratio']:.2f}; A turns 2..{a.turns} cached "
                  + ", ".join(f"{t['cached_tokens']}/{t['prompt_tokens']}" for t in a_turns), flush=True)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    med = lambda xs: statistics.median(xs) if xs else 0
    summary = {
        "kvgate": a.kvgate, "parallel": a.parallel, "prefix_words": a.prefix_words, "rounds": len(rounds),
        "b_cached_a_prefix": med([x["b_a_prefix"]["cached_tokens"] for x in rounds]),
        "b_cached_new_prefix": med([x["b_new_prefix"]["cached_tokens"] for x in rounds]),
        "b_prompt_tokens": med([x["b_a_prefix"]["prompt_tokens"] for x in rounds]),
        "b_ms_a_prefix": med([x["b_a_prefix"]["ms"] for x in rounds]),
        "b_ms_new_prefix": med([x["b_new_prefix"]["ms"] for x in rounds]),
        "ratio": med([x["ratio"] for x in rounds]),
        "a_reuse": med([t["cached_tokens"] / max(1, t["prompt_tokens"]) for x in rounds for t in x["a_turns"]]),
        "a_uncached": med([t["prompt_tokens"] - t["cached_tokens"] for x in rounds for t in x["a_turns"]]),
    }
    print("median: B cached {b_cached_a_prefix} of {b_prompt_tokens} on A's prefix, {b_cached_new_prefix} on a new "
          "one; B latency {b_ms_a_prefix:.0f} ms vs {b_ms_new_prefix:.0f} ms, ratio {ratio:.2f}; A's turns 2.. "
          "reuse {a_reuse:.3f} of their prompt ({a_uncached} tokens not cached)".format(**summary))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "rounds": rounds}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
