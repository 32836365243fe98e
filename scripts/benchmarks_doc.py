#!/usr/bin/env python3
"""Writes the measured parts of docs/BENCHMARKS.md from a scripts/benchmarks.sh output folder.

usage: benchmarks_doc.py OUT_DIR DOC

Between the markers <!-- BEGIN name --> ... <!-- END name --> the text is replaced:
  prefill, replay-agent-timestamp, replay-agent-zh-reasoning, overhead: the command's summary
      (OUT_DIR/name.txt) as a code block;
  replay-table: both replays side by side (from OUT_DIR/replay-*/replay.json);
  summaries: every compaction's summary request, the engine's own cache figures;
  clients: the client family at 16K and 32K, with and without plain words (from
      OUT_DIR/clients-*/clients.json; a run not in OUT_DIR keeps its rows).
A section whose files are missing keeps its previous content. The SVG charts are copied to
docs/benchmarks/.
"""
import json
import pathlib
import re
import shutil
import sys

TRACES = ["agent-timestamp", "agent-zh-reasoning"]


def replace(doc, name, body):
    pattern = re.compile(rf"(<!-- BEGIN {re.escape(name)} -->\n).*?(\n<!-- END {re.escape(name)} -->)", re.S)
    if not pattern.search(doc):
        sys.exit(f"{name}: no markers in the document")
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), doc)


def path_of(report, name):
    return next((p for p in report["paths"] if p["path"] == name), None)


def pct(x):
    return f"{100 * x:.1f} %"


def replay_table(reports):
    head = "| |" + "|".join(f" {t} direct | through kvgate " for t in reports) + "|"
    rows = [head, "|---|" + "---|---|" * len(reports)]
    def row(label, fn):
        cells = []
        for r in reports.values():
            for name in ("direct", "gateway"):
                p = path_of(r, name)
                cells.append(fn(p["summary"]) if p else "")
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    def failed(s):
        n = sum(s["failures"].values())
        return f"{n} of {s['turns']} (from turn {s['first_failure_turn']})" if n else "**0**"
    row("failed turns", failed)
    row("prefilled ÷ prompt tokens", lambda s: f"{s['prefilled_ratio']:.3f}")
    row("engine tokens computed (all requests, summaries included)", lambda s: pct(s["engine_processed_ratio"]))
    row("TTFT p50 (answered turns)", lambda s: f"{s['ttft_ms']['p50'] / 1000:.1f} s")
    row("compactions", lambda s: str(s["compactions"]) if s["compactions"] else "—")
    return "\n".join(rows)


def summaries_table(reports):
    rows = ["| trace | turn | tokens before → after | summary request: cached / prompt tokens | generated | time |",
            "|---|---|---|---|---|---|"]
    for trace, r in reports.items():
        g = path_of(r, "gateway")
        for t in (g or {}).get("turns", []):
            for c in t.get("compactions", []):
                s = c.get("summary_request") or {}
                share = s.get("cached_tokens", 0) / max(1, s.get("prompt_tokens", 1))
                rows.append(f"| {trace} | {t['turn']} | {c.get('tokens_before', 0):,} → {c.get('tokens_after', 0):,} | "
                            f"{s.get('cached_tokens', 0):,} / {s.get('prompt_tokens', 0):,} ({pct(share)}) | "
                            f"{s.get('generated_tokens', '')} | {s.get('ms', 0) / 1000:.1f} s |")
    return "\n".join(rows)


CLIENT_RUNS = [("16k", ""), ("16k", "-plain"), ("32k", ""), ("32k", "-plain")]


def table_rows(doc, name):
    """The rows of the table between the markers of `name` (header and rule left out)."""
    m = re.search(rf"<!-- BEGIN {re.escape(name)} -->\n(.*?)\n<!-- END {re.escape(name)} -->", doc, re.S)
    lines = m.group(1).splitlines() if m else []
    return [l for l in lines[2:] if l.startswith("|")]


def clients_table(reports, previous_rows):
    """One row per behaviour and context: failed turns, compactions (bound), computed ÷ sent by
    the engine's counters and prefilled ÷ prompt from the answers, the ideal gateway's ratio on
    the same turns and the steady formula, sessions per conversation — without and with
    plain words. A run (context, words) with no report keeps its rows from `previous_rows`."""
    head = ("| behaviour | context | words | failed | compactions (bound) | engine computed ÷ sent | "
            "prefilled ÷ prompt (answers) | ideal gateway | 2·H·g/((H−L)(H+L)) | sessions / conversations | "
            "violations |")
    rows = [head, "|---|---|---|---|---|---|---|---|---|---|---|"]
    for ctx, plain in CLIENT_RUNS:
        report = reports.get((ctx, plain))
        if report is None:
            words = "plain" if plain else "any"
            rows += [r for r in previous_rows
                     if [c.strip() for c in r.split("|")[2:4]] == [ctx.upper(), words]]
            continue
        for run in report["runs"]:
            if run["path"] != "gateway":
                continue
            f = run["figures"]
            failed = sum(f["failures"].values()) if f["failures"] else 0
            rows.append(f"| {run['behaviour']} (seed {run['seed']}) | {ctx.upper()} | "
                        f"{'plain' if plain else 'any'} | {failed} / {f['turns']} | "
                        f"{f['compactions']} ({f['compaction_bound']}) | {f['engine_processed_ratio']:.3f} | "
                        f"{f['prefilled_ratio']:.3f} | {f['ratio_bound']:.3f} | {f['steady_ratio_bound']:.3f} | "
                        f"{f['sessions']} / {f['conversations_started']} | {len(run['violations'])} |")
    return "\n".join(rows)


def main():
    out, doc_path = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    doc = doc_path.read_text()
    charts = doc_path.parent / "benchmarks"
    charts.mkdir(exist_ok=True)
    for name in ["prefill", "overhead"] + [f"replay-{t}" for t in TRACES]:
        summary = out / f"{name}.txt"
        if summary.exists():
            doc = replace(doc, name, "```\n" + summary.read_text().rstrip() + "\n```")
    for src, dst in [("prefill/prefill.svg", "prefill.svg"), ("overhead/overhead.svg", "overhead.svg")] + \
                    [(f"replay-{t}/replay.svg", f"replay-{t}.svg") for t in TRACES]:
        if (out / src).exists():
            shutil.copyfile(out / src, charts / dst)
    reports = {t: json.loads((out / f"replay-{t}/replay.json").read_text())
               for t in TRACES if (out / f"replay-{t}/replay.json").exists()}
    if reports:
        doc = replace(doc, "replay-table", replay_table(reports))
        doc = replace(doc, "summaries", summaries_table(reports))
    clients = {(ctx, plain): json.loads((out / f"clients-{ctx}{plain}/clients.json").read_text())
               for ctx, plain in CLIENT_RUNS if (out / f"clients-{ctx}{plain}/clients.json").exists()}
    if clients:
        doc = replace(doc, "clients", clients_table(clients, table_rows(doc, "clients")))
    doc_path.write_text(doc)
    print(f"{doc_path}: updated from {out}")


if __name__ == "__main__":
    main()
