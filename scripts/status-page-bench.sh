#!/usr/bin/env bash
# The status page's size and load time against a running gateway:
#   scripts/status-page-bench.sh http://127.0.0.1:8080 [API_KEY] [RUNS]
# Prints the bytes each part of the page takes on the wire (gzip, as browsers ask) and, over
# RUNS (default 5) loads in headless Chromium, the milliseconds from navigation to the first
# render with its data (the page's data-ready-ms: its script, Chart.js, /kvgate/v1/status and
# /kvgate/v1/sessions fetched and drawn). Chromium's own start is not included.
set -euo pipefail
url=${1:?usage: status-page-bench.sh URL [API_KEY] [RUNS]}
key=${2:-}
runs=${3:-5}
auth=()
[[ -n "$key" ]] && auth=(-H "Authorization: Bearer $key")
chromium=$(command -v chromium || command -v chromium-browser || true)
[[ -n "$chromium" ]] || { echo "status-page-bench: chromium is not installed" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

total=0
for path in / /kvgate/assets/status.js /kvgate/assets/chart.min.js /kvgate/v1/status /kvgate/v1/sessions; do
  bytes=$(curl -fsS -H 'Accept-Encoding: gzip' "${auth[@]}" -o /dev/null -w '%{size_download}' "$url$path")
  printf '%-28s %8d bytes\n' "$path" "$bytes"
  total=$((total + bytes))
done
printf '%-28s %8d bytes\n' "total" "$total"

page="$url/"
[[ -n "$key" ]] && page="$url/?key=$key"
times=()
for i in $(seq 1 "$runs"); do
  dom=$("$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir="$tmp/p$i" \
    --virtual-time-budget=3000 --dump-dom "$page" 2>/dev/null)
  ms=$(grep -o 'data-ready-ms="[0-9]*"' <<<"$dom" | grep -o '[0-9]*' || true)
  [[ -n "$ms" ]] || { echo "run $i: the page did not reach its ready state" >&2; exit 1; }
  times+=("$ms")
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
echo "ready with data, ms (navigation start -> first render with data), $runs runs: $sorted(median $median)"
