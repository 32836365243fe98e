# Sourced by the figure scripts beside it: starts the pinned engine (cached by scripts/setup.sh)
# on a tiny-qwen3 model and `kvgate serve` in front of it, both on free loopback ports, and
# stops them on exit. Needs $kv (the kvgate binary); sets $w (a scratch folder), $ep (the
# engine's port, key K) and $gp (kvgate's port).
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
