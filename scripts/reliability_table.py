#!/usr/bin/env python3
"""Writes the measured tables of docs/RELIABILITY.md from the suites' JSON records.

usage: reliability_table.py RESULTS_DIR DOC [--ctest-log FILE]

RESULTS_DIR holds one JSON file per fault/abuse/load case (written by the tests through
testing/fault_support.h: record_reliability) and, when the fuzzers ran, fuzz-*.json files
(written by scripts/reliability.sh). The text between the markers
  <!-- BEGIN faults -->, <!-- BEGIN load -->, <!-- BEGIN fuzz -->  ...  <!-- END ... -->
is replaced; a section without new records keeps its previous content.
"""
import json
import pathlib
import re
import sys

ORDER = [
    "engine_sigkill_between_and_mid_stream", "engine_sigkill_during_prefill", "engine_sigstop",
    "engine_sigstop_one_request",
    "engine_5xx_healthy_health", "engine_garbage", "engine_truncated_sse", "engine_stall_after_headers",
    "store_disk_full_read_only", "store_locked", "kvgate_sigkill_restart",
    "abuse_oversized", "abuse_slow_clients", "abuse_many_sessions_table", "abuse_many_sessions_engine",
    "abuse_path_tricks", "abuse_open_bind_without_key",
]


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def client_summary(client):
    if not isinstance(client, dict):
        return ""
    return "; ".join(f"{k}: {v}" for k, v in client.items())


def measured(rec):
    parts = []
    for key in ("measured_ms", "bound_ms"):
        v = rec.get(key)
        if isinstance(v, dict):
            parts += [f"{k.replace('_', ' ')} {x / 1000:.1f} s" for k, x in v.items()]
        elif isinstance(v, (int, float)):
            parts.append(f"bound {v / 1000:.0f} s")
    for key in ("engine_restarts", "turns", "recognised_after_restart", "not_served_from_cache", "sessions_mixed"):
        if key in rec:
            parts.append(f"{key.replace('_', ' ')} {rec[key]}")
    if "kill_points" in rec:
        parts.append("kills: " + ", ".join(f"{k} {v}" for k, v in rec["kill_points"].items()))
    return "; ".join(parts)


def faults_table(records):
    rows = ["| case | fault injected | expected | test | faults | what clients saw | measured | sessions lost | crashes | result |",
            "|---|---|---|---|---:|---|---|---:|---:|---|"]
    keys = [k for k in ORDER if k in records] + sorted(k for k in records if k not in ORDER and k != "load")
    for k in keys:
        r = records[k]
        rows.append("| " + " | ".join(cell(x) for x in [
            k, r.get("fault", ""), r.get("expected", ""), f"`{r.get('test', '')}`", r.get("faults", ""),
            client_summary(r.get("client")), measured(r), r.get("sessions_lost", "—"), r.get("crashes", "—"),
            r.get("result", "")]) + " |")
    total_faults = sum(int(r.get("faults", 0) or 0) for r in records.values() if isinstance(r.get("faults", 0), int))
    passed = sum(1 for r in records.values() if r.get("result") == "pass")

    def counted(key):  # the sum over the records that count `key`, and how many do
        values = [int(r[key]) for r in records.values() if isinstance(r.get(key), (int, float))]
        return f"{sum(values)} (counted in {len(values)} of {len(records)} cases)"

    rows.append("")
    rows.append(f"Totals: {len(records)} cases, {passed} passed; {total_faults} faults injected; "
                f"sessions lost {counted('sessions_lost')}; crashes {counted('crashes')}. "
                "— : the case does not count it.")
    return "\n".join(rows)


def load_section(rec):
    out = [f"Run: {rec.get('fault', '')}.", ""]
    out.append("| figure | value |")
    out.append("|---|---|")
    out.append(f"| completed turns | {rec.get('completed_turns', 0):.0f} ({rec.get('turns_per_s', 0):.2f}/s) |")
    out.append(f"| client outcomes | {cell(client_summary(rec.get('client')))} |")
    lo, hi = rec.get("turns_fewest_most", [0, 0])
    out.append(f"| fairness (Jain's index over conversations) | {rec.get('fairness_jain', 0):.3f} (fewest {lo}, most {hi} turns) |")
    out.append(f"| worst latency of any request | {rec.get('worst_latency_s', 0):.1f} s |")
    o = rec.get("order", {})
    out.append(f"| per-session order (bursts of 3 on one session) | {o.get('bursts', 0)} bursts, {o.get('served', 0)} "
               f"requests served, {o.get('violations', 0)} out of order |")
    q = rec.get("queue", {})
    if q:
        out.append(f"| admission | {q.get('admitted', 0)} admitted, {q.get('refused_queue_full', 0)} refused (queue full), "
                   f"{q.get('refused_timeout', 0)} timed out, longest wait {q.get('longest_wait_ms', 0) / 1000:.1f} s |")
    out.append(f"| sessions at the end | {rec.get('sessions', '')} (lost: {rec.get('sessions_lost', '')}) |")
    out.append(f"| RSS peak, middle third → last third | {rec.get('rss_mid_peak_mib', 0):.1f} MiB → "
               f"{rec.get('rss_late_peak_mib', 0):.1f} MiB |")
    out.append(f"| result | {rec.get('result', '')} |")
    out.append("")
    series = rec.get("rss", [])
    step = max(1, len(series) // 12)
    picked = series[::step]
    if series and picked[-1] is not series[-1]:
        picked.append(series[-1])
    out.append("kvgate RSS over time:")
    out.append("")
    out.append("| s | " + " | ".join(str(int(p["s"])) for p in picked) + " |")
    out.append("|---|" + "---:|" * len(picked))
    out.append("| MiB | " + " | ".join(f"{p['rss_mib']:.1f}" for p in picked) + " |")
    return "\n".join(out)


def fuzz_table(fuzz):
    rows = ["| target | seconds | executions | exec/s | coverage (edges) | features | corpus | crashes |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(fuzz, key=lambda r: r["target"]):
        rows.append(f"| `{r['target']}` | {r['seconds']} | {r['executions']:,} | {r['exec_per_s']:,} | {r['cov']:,} | "
                    f"{r['ft']:,} | {r['corpus']:,} | {r['crashes']} |")
    return "\n".join(rows)


def replace(doc, name, body):
    pattern = re.compile(rf"(<!-- BEGIN {name} -->\n).*?(\n<!-- END {name} -->)", re.S)
    if not pattern.search(doc):
        sys.exit(f"{name}: markers missing in the document")
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), doc)


def main():
    results = pathlib.Path(sys.argv[1])
    doc_path = pathlib.Path(sys.argv[2])
    records, fuzz = {}, []
    for f in sorted(results.glob("*.json")):
        data = json.loads(f.read_text())
        if f.name.startswith("fuzz-"):
            fuzz.append(data)
        else:
            records[data["case"]] = data
    doc = doc_path.read_text()
    load = records.pop("load", None)
    if records:
        doc = replace(doc, "faults", faults_table(records))
    if load:
        doc = replace(doc, "load", load_section(load))
    if fuzz:
        doc = replace(doc, "fuzz", fuzz_table(fuzz))
    doc_path.write_text(doc)
    print(f"{doc_path}: {len(records)} fault/abuse cases, {'a' if load else 'no'} load run, {len(fuzz)} fuzz targets")


if __name__ == "__main__":
    main()
