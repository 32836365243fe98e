#!/usr/bin/env python3
"""Claude Code's side requests between the turns of one conversation, measured on one slot.

    tests/agents/claude_side_requests.py [--turns 3] [--kvgate build/src/cli/kvgate] [--keep DIR]

Starts `kvgate up` with the pinned engine (cached by scripts/setup.sh) on a synthesized tiny
qwen3 with one slot (32K), then Claude Code interactive (in a pseudo
terminal: its title and other small-model requests are those of an interactive run)
through `kvgate run claude`, and types TURNS prompts, waiting after each until no request has
come for a while. Prints every request kvgate served (its log: conversation, messages, prompt
tokens, tokens the engine computed) and the engine's own counter (llamacpp:prompt_tokens_total)
per turn. A side request is one of another conversation than the main one (the conversation
with the most requests). Claude Code's HOME is private and pre-seeded (onboarding done, the
folder trusted, the key approved), so nothing of the caller's is read or written.
"""
import argparse, glob, json, os, pty, re, select, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE_KEY = ""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def wait_http(url, seconds=60):
    for _ in range(seconds * 4):
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except Exception:
            time.sleep(0.25)
    sys.exit(f"no answer from {url}")


def engine_computed(port):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": "Bearer " + ENGINE_KEY})
    text = urllib.request.urlopen(req, timeout=5).read().decode()
    m = re.search(r"^llamacpp:prompt_tokens_total (\S+)", text, re.M)
    return int(float(m.group(1)))


def engine_busy(port):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": "Bearer " + ENGINE_KEY})
    text = urllib.request.urlopen(req, timeout=5).read().decode()
    m = re.search(r"^llamacpp:requests_processing (\S+)", text, re.M)
    return m is not None and float(m.group(1)) > 0


def requests(log):
    out = []
    with open(log, errors="replace") as f:
        for line in f:
            if '"event":"request"' in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--kvgate", default=os.path.join(HERE, "..", "..", "build", "src", "cli", "kvgate"))
    ap.add_argument("--keep", help="leave the scratch folder here")
    ap.add_argument("--quiet-s", type=float, default=10, help="a turn is over after this long without a request")
    ap.add_argument("--inject-side", action="store_true",
                    help="after each turn but the last, send a title request of Claude Code's shape (its own "
                         "system prompt, the first prompt, no tools) as another conversation would")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for Claude Code (repeatable)")
    a = ap.parse_args()
    kv = os.path.abspath(a.kvgate)
    w = a.keep or tempfile.mkdtemp()
    os.makedirs(w, exist_ok=True)
    server = sorted(glob.glob(os.path.expanduser("~/.cache/kvgate/engine/llama.cpp-*/bin/llama-server")))[0]
    claude = glob.glob(os.path.join(HERE, "node_modules/@anthropic-ai/claude-code-linux-*/claude"))[0]
    subprocess.run([kv, "synth", "--preset", "tiny-qwen3", "--out", f"{w}/model.gguf"], check=True, stdout=subprocess.DEVNULL)
    gp = free_port()
    procs = []
    try:
        # kvgate up as a user starts it (one slot at this context; the main conversation's
        # engine state saved to disk when another takes the slot).
        procs.append(subprocess.Popen([kv, "up", f"{w}/model.gguf", "--listen", f"127.0.0.1:{gp}", "--ctx", "32768",
                                       "--threads", "2", "--server", server, "--log-dir", f"{w}/logs", "--state-dir",
                                       f"{w}/state"], stdout=open(f"{w}/gw.log", "w"), stderr=subprocess.STDOUT))
        wait_http(f"http://127.0.0.1:{gp}/health", 180)
        ep = int(re.search(r"pid \d+ on http://127\.0\.0\.1:(\d+)", open(f"{w}/gw.log").read()).group(1))
        global ENGINE_KEY
        ENGINE_KEY = open(f"{w}/state/engine.key").read().strip()
        home, work = f"{w}/home", f"{w}/work"
        shutil.copytree(os.path.join(HERE, "workdir"), work, dirs_exist_ok=True)
        os.makedirs(f"{home}/.claude", exist_ok=True)
        key = "kvgate-side-requests-key"
        with open(f"{home}/.claude/.claude.json", "w") as f:
            json.dump({"hasCompletedOnboarding": True, "theme": "dark", "bypassPermissionsModeAccepted": True,
                       "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                       "projects": {work: {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}}}, f)
        env = {"HOME": home, "CLAUDE_CONFIG_DIR": f"{home}/.claude", "PATH": os.environ["PATH"], "LANG": "C.UTF-8",
               "TERM": "xterm-256color", "KVGATE_API_KEY": key, "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "512"}
        env.update(e.split("=", 1) for e in a.env)
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(work)
            os.execve(kv, [kv, "run", "claude", "--url", f"http://127.0.0.1:{gp}", "--agent-bin", claude], env)
        screen = bytearray()

        def pump(seconds):
            end = time.time() + seconds
            while time.time() < end:
                r, _, _ = select.select([fd], [], [], 0.2)
                if r:
                    try:
                        screen.extend(os.read(fd, 65536))
                    except OSError:
                        return

        def settle():
            # Over when the engine has been idle and kvgate has logged no request for quiet_s.
            last, n = time.time(), len(requests(f"{w}/gw.log"))
            while time.time() - last < a.quiet_s:
                pump(1)
                m = len(requests(f"{w}/gw.log"))
                if m != n or engine_busy(ep):
                    last, n = time.time(), m

        pump(15)
        per_turn = []
        for t in range(1, a.turns + 1):
            before, nreq = engine_computed(ep), len(requests(f"{w}/gw.log"))
            for ch in f"Turn {t}: list the files in this folder and say what README.md says.":
                os.write(fd, ch.encode())
                pump(0.01)
            os.write(fd, b"\r")
            settle()
            per_turn.append((t, engine_computed(ep) - before, nreq, len(requests(f"{w}/gw.log"))))
            if a.inject_side and t < a.turns:
                before, nreq = engine_computed(ep), len(requests(f"{w}/gw.log"))
                body = {"model": "model", "max_tokens": 32, "stream": False,
                        "system": [{"type": "text", "text": "Generate a concise, sentence-case title (3-7 words) "
                                    "that captures the main topic or goal of this coding conversation."}],
                        "messages": [{"role": "user", "content": "Turn 1: list the files in this folder and say what "
                                      "README.md says."}]}
                req = urllib.request.Request(f"http://127.0.0.1:{gp}/v1/messages", data=json.dumps(body).encode(),
                                             headers={"content-type": "application/json", "x-api-key": key,
                                                      "anthropic-version": "2023-06-01"})
                urllib.request.urlopen(req, timeout=300).read()
                time.sleep(2)
                per_turn.append((f"{t}+side", engine_computed(ep) - before, nreq, len(requests(f"{w}/gw.log"))))
        os.write(fd, b"/exit\r")
        pump(3)
        os.kill(pid, signal.SIGTERM)
        with open(f"{w}/screen.txt", "wb") as f:
            f.write(screen)
        reqs = requests(f"{w}/gw.log")
        sessions = {}
        for r in reqs:
            sessions[r.get("session")] = sessions.get(r.get("session"), 0) + 1
        main = max(sessions, key=lambda s: (sessions[s], max(r.get("prompt_tokens", 0) for r in reqs if r.get("session") == s)))
        for t, computed, lo, hi in per_turn:
            print(f"{'turn ' + str(t) if isinstance(t, int) else 'injected side request after turn ' + t[:-5]}: engine computed {computed} prompt tokens (llamacpp:prompt_tokens_total), {hi - lo} requests")
            for r in reqs[lo:hi]:
                kind = "main" if r.get("session") == main else "side"
                print(f"  {kind:4} {r.get('route')} conversation {r.get('session')} messages {r.get('messages')}: "
                      f"computed {r.get('prefilled_tokens')} of {r.get('prompt_tokens')} prompt tokens, "
                      f"slot {r.get('slot')}, restored {r.get('kv_restored_tokens')}, recognised {r.get('recognised_by')}, "
                      f"status {r.get('status')}")
    finally:
        for p in procs:
            p.terminate()
        if not a.keep:
            shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    main()
