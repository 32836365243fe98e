// Structural diff of two recorded requests: says which JSON fields differ, where inside a long
// string (which lines, or which characters of a one-line string), and shows both values.
//
// usage: node diff_requests.mjs A.json B.json [--json] [--width N] [--lines N]
//
// A and B are files written by record_proxy.mjs (compared: path, request headers less host and
// content-length, request body) or any JSON documents (compared whole).
//   --json     print the differences as a JSON array instead of text
//   --width N  characters of context shown around a change inside a string (default 60)
//   --lines N  changed lines shown per side for a multi-line string (default 6)
// A string holding a JSON object is compared as one (its path ends in `<json>`).
// Arrays whose elements are all objects with distinct names (`name` or `function.name`: tool
// lists) are matched by name,
// so an inserted or reordered tool is reported as such; other arrays are compared index by
// index, so items appended to a conversation are reported as added.
// Exits 0 whether or not the documents differ (1 on bad input).
import fs from "node:fs";

function parseArgs(argv) {
  const opts = { json: false, width: 60, lines: 6, files: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--json") opts.json = true;
    else if (argv[i] === "--width") opts.width = Number(argv[++i]);
    else if (argv[i] === "--lines") opts.lines = Number(argv[++i]);
    else opts.files.push(argv[i]);
  }
  if (opts.files.length !== 2) {
    throw new Error("usage: node diff_requests.mjs A.json B.json [--json] [--width N] [--lines N]");
  }
  return opts;
}

// What is compared of a file: a proxy record's request, or the whole document.
function comparable(doc) {
  if (doc && typeof doc === "object" && doc.request && "method" in doc && "path" in doc) {
    const headers = { ...doc.request.headers };
    delete headers.host;
    delete headers["content-length"];
    return { path: doc.path, headers, body: doc.request.body };
  }
  return doc;
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// The name of a tool: top-level (Anthropic, Responses) or under `function` (chat completions).
const nameOf = (e) => (isObject(e) ? (typeof e.name === "string" ? e.name : e.function?.name) : undefined);

function keyed(array) {
  if (array.length === 0 || !array.every((e) => typeof nameOf(e) === "string")) return null;
  const map = new Map(array.map((e) => [nameOf(e), e]));
  return map.size === array.length ? map : null;
}

function childPath(path, key) {
  if (typeof key === "number") return `${path}[${key}]`;
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? (path ? `${path}.${key}` : key) : `${path}[${JSON.stringify(key)}]`;
}

function diff(a, b, path, out) {
  if (Array.isArray(a) && Array.isArray(b)) return diffArrays(a, b, path, out);
  if (isObject(a) && isObject(b)) {
    for (const key of Object.keys(a)) {
      if (!(key in b)) out.push({ path: childPath(path, key), kind: "removed", a: a[key] });
      else diff(a[key], b[key], childPath(path, key), out);
    }
    for (const key of Object.keys(b)) {
      if (!(key in a)) out.push({ path: childPath(path, key), kind: "added", b: b[key] });
    }
    return out;
  }
  if (typeof a === "string" && typeof b === "string") {
    if (a === b) return out;
    const [ja, jb] = [embeddedJson(a), embeddedJson(b)];
    if (ja !== undefined && jb !== undefined) return diff(ja, jb, `${path}<json>`, out);
    out.push({ path, kind: "changed", a, b, where: stringChange(a, b) });
    return out;
  }
  if (JSON.stringify(a) !== JSON.stringify(b)) out.push({ path, kind: "changed", a, b });
  return out;
}

// A string that holds a JSON object or array (Claude Code's metadata.user_id, Codex's turn
// metadata header) is compared field by field; the path then carries `<json>`.
function embeddedJson(s) {
  if (!/^\s*[[{]/.test(s)) return undefined;
  try {
    const v = JSON.parse(s);
    return typeof v === "object" && v !== null ? v : undefined;
  } catch {
    return undefined;
  }
}

function diffArrays(a, b, path, out) {
  const ka = keyed(a);
  const kb = keyed(b);
  if (ka && kb) {
    for (const [name, value] of ka) {
      const p = `${path}[name=${name}]`;
      if (!kb.has(name)) out.push({ path: p, kind: "removed", a: value });
      else diff(value, kb.get(name), p, out);
    }
    for (const [name, value] of kb) {
      if (!ka.has(name)) out.push({ path: `${path}[name=${name}]`, kind: "added", b: value });
    }
    const common = (m, other) => [...m.keys()].filter((n) => other.has(n));
    const orderA = common(ka, kb);
    const orderB = common(kb, ka);
    if (orderA.join("\n") !== orderB.join("\n")) {
      out.push({ path: `${path}[*].name`, kind: "reordered", a: orderA, b: orderB });
    }
    return out;
  }
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) diff(a[i], b[i], childPath(path, i), out);
  for (let i = n; i < a.length; i++) out.push({ path: childPath(path, i), kind: "removed", a: a[i] });
  for (let i = n; i < b.length; i++) out.push({ path: childPath(path, i), kind: "added", b: b[i] });
  return out;
}

// Where two strings differ: for text of several lines, the range of lines between the common
// first and last lines; for one line, the range of characters between the common prefix and
// suffix. Ranges are 0-based and end-exclusive.
function stringChange(a, b) {
  const la = a.split("\n");
  const lb = b.split("\n");
  if (la.length > 1 || lb.length > 1) {
    let head = 0;
    while (head < la.length && head < lb.length && la[head] === lb[head]) head++;
    let tail = 0;
    while (tail < la.length - head && tail < lb.length - head &&
           la[la.length - 1 - tail] === lb[lb.length - 1 - tail]) tail++;
    return {
      unit: "lines", of_a: la.length, of_b: lb.length,
      a: [head, la.length - tail], b: [head, lb.length - tail],
      a_lines: la.slice(head, la.length - tail), b_lines: lb.slice(head, lb.length - tail),
    };
  }
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  return { unit: "chars", of_a: a.length, of_b: b.length, a: [head, a.length - tail], b: [head, b.length - tail] };
}

function short(value, width) {
  const text = JSON.stringify(value);
  return text.length > 2 * width ? `${text.slice(0, 2 * width)}… (${text.length} chars)` : text;
}

function clip(line, width) {
  return line.length > 2 * width ? `${line.slice(0, 2 * width)}… (${line.length} chars)` : line;
}

function excerpt(s, [from, to], width) {
  const left = Math.max(0, from - width);
  const right = Math.min(s.length, to + width);
  return (left > 0 ? "…" : "") + s.slice(left, from) + "⟦" + s.slice(from, to) + "⟧" + s.slice(to, right) +
    (right < s.length ? "…" : "");
}

function printText(differences, opts) {
  for (const d of differences) {
    const mark = { changed: "~", added: "+", removed: "-", reordered: "↕" }[d.kind];
    if (d.kind === "added") console.log(`${mark} ${d.path}  (only in B): ${short(d.b, opts.width)}`);
    else if (d.kind === "removed") console.log(`${mark} ${d.path}  (only in A): ${short(d.a, opts.width)}`);
    else if (d.kind === "reordered") console.log(`${mark} ${d.path}\n    A: ${d.a.join(", ")}\n    B: ${d.b.join(", ")}`);
    else if (!d.where) console.log(`${mark} ${d.path}\n    A: ${short(d.a, opts.width)}\n    B: ${short(d.b, opts.width)}`);
    else if (d.where.unit === "chars") {
      const w = d.where;
      console.log(`${mark} ${d.path}  (chars ${w.a[0]}..${w.a[1]} of ${w.of_a} / ${w.b[0]}..${w.b[1]} of ${w.of_b})`);
      console.log(`    A: ${JSON.stringify(excerpt(d.a, w.a, opts.width))}`);
      console.log(`    B: ${JSON.stringify(excerpt(d.b, w.b, opts.width))}`);
    } else {
      const w = d.where;
      console.log(`${mark} ${d.path}  (lines ${w.a[0] + 1}..${w.a[1]} of ${w.of_a} / ${w.b[0] + 1}..${w.b[1]} of ${w.of_b})`);
      for (const [side, lines] of [["A", w.a_lines], ["B", w.b_lines]]) {
        for (const line of lines.slice(0, opts.lines)) console.log(`    ${side}| ${clip(line, opts.width)}`);
        if (lines.length > opts.lines) console.log(`    ${side}| … ${lines.length - opts.lines} more lines`);
      }
    }
  }
  console.log(`${differences.length} difference${differences.length === 1 ? "" : "s"}`);
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const [a, b] = opts.files.map((f) => comparable(JSON.parse(fs.readFileSync(f, "utf8"))));
  const differences = diff(a, b, "", []);
  if (opts.json) console.log(JSON.stringify(differences, null, 2));
  else printText(differences, opts);
}

try {
  main();
} catch (err) {
  console.error(`diff_requests: ${err.message}`);
  process.exit(1);
}
