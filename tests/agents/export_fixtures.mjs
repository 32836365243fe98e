// Copies the requests worth keeping from a capture (tests/agents/capture.sh) into the fixtures,
// with the capture's temporary paths replaced by placeholders.
//
// usage: node export_fixtures.mjs CAPTURE_DIR FIXTURES_DIR
//
// For each CLI in CAPTURE_DIR: every request of run 1 (run1-NNN.json), the first request of runs
// 2 and 3 (run2-001.json, run3-001.json) and every request of the continued conversation
// (continue-NNN.json), as record_proxy.mjs wrote them (request and answer). Replaced, in every
// string: the CLI's working folder by <WORKDIR>, its HOME by <HOME>, the same paths with every
// character other than a letter or digit written as `-` (how Claude Code and Qwen Code name a
// project's memory folder) by <WORKDIR-DASHED> and <HOME-DASHED>, and the capture's temporary
// folder by <TMP>. Requests are kept whole; an answer's event stream that would make the file
// larger than 200 KB keeps its first and last 20 events, with a comment line (`: N events
// trimmed`) between them and response.body_trimmed = N.
import fs from "node:fs";
import path from "node:path";

const LIMIT = 200 * 1024;

function readPaths(dir) {
  const out = {};
  for (const line of fs.readFileSync(path.join(dir, "paths.env"), "utf8").split("\n")) {
    const m = line.match(/^(\w+?)_(workdir|home)=(.*)$/);
    if (m) (out[m[1]] ??= {})[m[2]] = m[3];
  }
  return out;
}

function replacer(paths) {
  const dashed = (p) => p.replace(/[^A-Za-z0-9]/g, "-");
  const tmp = path.dirname(path.dirname(paths.workdir));
  // Longest first, so that a path is replaced before the folder that holds it.
  const pairs = [
    [paths.workdir, "<WORKDIR>"], [paths.home, "<HOME>"],
    [dashed(paths.workdir), "<WORKDIR-DASHED>"], [dashed(paths.home), "<HOME-DASHED>"],
    [tmp, "<TMP>"], [dashed(tmp), "<TMP-DASHED>"],
  ].sort((a, b) => b[0].length - a[0].length);
  return (text) => pairs.reduce((s, [from, to]) => s.split(from).join(to), text);
}

// Keeps the first and last `keep` events of a recorded event stream.
function trimEvents(record, keep) {
  const body = record.response?.body;
  if (typeof body !== "string") return false;
  const events = body.split("\n\n");
  if (events.length <= 2 * keep) return false;
  const dropped = events.length - 2 * keep;
  record.response.body = [...events.slice(0, keep), `: ${dropped} events trimmed`, ...events.slice(-keep)].join("\n\n");
  record.response.body_trimmed = dropped;
  return true;
}

function exportOne(from, to, replace) {
  let text = replace(fs.readFileSync(from, "utf8"));
  if (Buffer.byteLength(text) > LIMIT) {
    const record = JSON.parse(text);
    if (trimEvents(record, 20)) text = JSON.stringify(record, null, 2) + "\n";
  }
  JSON.parse(text);
  if (Buffer.byteLength(text) > LIMIT) throw new Error(`${from} is over 200 KB`);
  fs.writeFileSync(to, text);
  return path.basename(to);
}

function main() {
  const [capture, fixtures] = process.argv.slice(2);
  if (!capture || !fixtures) throw new Error("usage: node export_fixtures.mjs CAPTURE_DIR FIXTURES_DIR");
  for (const [cli, paths] of Object.entries(readPaths(capture))) {
    const replace = replacer(paths);
    const out = path.join(fixtures, cli);
    fs.mkdirSync(out, { recursive: true });
    const written = [];
    for (const run of ["run1", "run2", "run3", "continue"]) {
      const dir = path.join(capture, cli, run, "requests");
      if (!fs.existsSync(dir)) continue;
      let files = fs.readdirSync(dir).filter((f) => /^\d+\.json$/.test(f)).sort();
      if (run === "run2" || run === "run3") files = files.slice(0, 1);
      for (const f of files) written.push(exportOne(path.join(dir, f), path.join(out, `${run}-${f}`), replace));
    }
    console.log(`${cli}: ${written.join(" ")}`);
  }
}

try {
  main();
} catch (err) {
  console.error(`export_fixtures: ${err.message}`);
  process.exit(1);
}
