// Summarises a capture (tests/agents/capture.sh): per CLI and run, the exit code, the time, and
// each request with the prompt figures the engine reported in its answer.
//
// usage: node capture_summary.mjs CAPTURE_DIR [--json]
//
// Figures, from the engine's own answer (the last event that carries them, for a stream):
//   timings   llama-server's `timings`: cache_n = prompt tokens taken from its cache,
//             prompt_n = prompt tokens it evaluated; cached share = cache_n / (cache_n + prompt_n)
//   usage     the API's usage object: chat completions prompt_tokens and
//             prompt_tokens_details.cached_tokens, responses input_tokens and
//             input_tokens_details.cached_tokens, messages cache_read_input_tokens of
//             input_tokens + cache_read_input_tokens + cache_creation_input_tokens
import fs from "node:fs";
import path from "node:path";

function events(body) {
  if (body === undefined || body === null) return [];
  if (typeof body === "object") return [body];
  const out = [];
  for (const line of String(body).split("\n")) {
    if (!line.startsWith("data:")) continue;
    const data = line.slice(5).trim();
    if (!data.startsWith("{")) continue;
    try {
      out.push(JSON.parse(data));
    } catch {
      // A truncated last event of a killed stream: nothing to read in it.
    }
  }
  return out;
}

// Every object under `v` stored under key `name`, depth first.
function findAll(v, name, out = []) {
  if (v === null || typeof v !== "object") return out;
  for (const [k, child] of Object.entries(v)) {
    if (k === name && child && typeof child === "object") out.push(child);
    findAll(child, name, out);
  }
  return out;
}

// The prompt, cached and output counts of one usage object, in any of the three APIs. Messages
// (Anthropic) counts cached prompt tokens apart from input_tokens; the others include them.
function promptUsage(u) {
  if ("cache_read_input_tokens" in u || "cache_creation_input_tokens" in u) {
    const cached = u.cache_read_input_tokens ?? 0;
    return { prompt: u.input_tokens + cached + (u.cache_creation_input_tokens ?? 0), cached, output: u.output_tokens };
  }
  return {
    prompt: u.prompt_tokens ?? u.input_tokens,
    cached: u.prompt_tokens_details?.cached_tokens ?? u.input_tokens_details?.cached_tokens,
    output: u.completion_tokens ?? u.output_tokens,
  };
}

function figures(response) {
  if (!response) return {};
  const evs = events(response.body);
  const timings = evs.flatMap((e) => findAll(e, "timings")).filter((t) => "prompt_n" in t).pop();
  const usage = evs.flatMap((e) => findAll(e, "usage"))
    .filter((u) => ["prompt_tokens", "input_tokens"].some((k) => typeof u[k] === "number")).pop();
  const out = {};
  if (timings) {
    out.timings = { cache_n: timings.cache_n, prompt_n: timings.prompt_n, predicted_n: timings.predicted_n };
  }
  if (usage) out.usage = promptUsage(usage);
  // A messages stream reports the output count apart, in its last message_delta.
  const last = evs.flatMap((e) => findAll(e, "usage")).filter((u) => typeof u.output_tokens === "number").pop();
  if (out.usage && last) out.usage.output = last.output_tokens;
  const stop = evs.flatMap((e) => [e.stop_reason, e.delta?.stop_reason, e.choices?.[0]?.finish_reason,
    e.response?.status]).filter(Boolean).pop();
  if (stop) out.stop = stop;
  const error = evs.map((e) => e.error).filter(Boolean).pop();
  if (error) out.error = typeof error === "string" ? error : error.message ?? JSON.stringify(error);
  return out;
}

function readText(file) {
  try {
    return fs.readFileSync(file, "utf8").trim();
  } catch {
    return null;
  }
}

function summariseRun(dir) {
  const reqDir = path.join(dir, "requests");
  const files = fs.existsSync(reqDir) ? fs.readdirSync(reqDir).filter((f) => /^\d+\.json$/.test(f)).sort() : [];
  const requests = files.map((f) => {
    const r = JSON.parse(fs.readFileSync(path.join(reqDir, f), "utf8"));
    const body = r.request.body;
    return {
      file: f,
      method: r.method,
      path: r.path,
      bytes: r.request.body_bytes,
      model: body?.model,
      stream: body?.stream,
      status: r.response?.status ?? r.response?.error ?? "no answer",
      ...figures(r.response),
    };
  });
  return {
    exit_code: readText(path.join(dir, "exit_code")),
    elapsed_s: readText(path.join(dir, "elapsed_s")),
    requests,
  };
}

function share(f) {
  if (f.timings) {
    const { cache_n: c, prompt_n: p } = f.timings;
    return `${c}/${c + p} (${((100 * c) / (c + p)).toFixed(1)}%) timings`;
  }
  if (f.usage && f.usage.cached !== undefined) return `${f.usage.cached}/${f.usage.prompt} usage`;
  return "-";
}

function main() {
  const [dir, flag] = process.argv.slice(2);
  if (!dir) throw new Error("usage: node capture_summary.mjs CAPTURE_DIR [--json]");
  const summary = {};
  for (const cli of fs.readdirSync(dir).sort()) {
    const cliDir = path.join(dir, cli);
    if (!fs.statSync(cliDir).isDirectory()) continue;
    summary[cli] = {};
    for (const run of fs.readdirSync(cliDir).filter((r) => /^(run\d+|continue)$/.test(r)).sort()) {
      summary[cli][run] = summariseRun(path.join(cliDir, run));
    }
  }
  if (flag === "--json") {
    console.log(JSON.stringify(summary, null, 2));
    return;
  }
  for (const [cli, runs] of Object.entries(summary)) {
    for (const [run, s] of Object.entries(runs)) {
      console.log(`${cli} ${run}: exit ${s.exit_code}, ${s.elapsed_s} s, ${s.requests.length} requests`);
      for (const r of s.requests) {
        console.log(`  ${r.file} ${r.method} ${r.path} ${r.bytes} B model=${r.model} stream=${r.stream} -> ${r.status}` +
          ` cached ${share(r)}${r.usage ? ` usage=${JSON.stringify(r.usage)}` : ""}` +
          `${r.stop ? ` stop=${r.stop}` : ""}${r.error ? ` error=${JSON.stringify(r.error)}` : ""}`);
      }
    }
  }
}

try {
  main();
} catch (err) {
  console.error(`capture_summary: ${err.message}`);
  process.exit(1);
}
