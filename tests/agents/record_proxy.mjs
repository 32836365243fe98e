// A recording HTTP proxy for agent CLIs: forwards every request to one upstream unchanged and
// writes each exchange to OUTDIR as a numbered JSON file (001.json, 002.json, ...).
//
// usage: node record_proxy.mjs --upstream URL --out OUTDIR [--port N] [--port-file FILE]
//
// It listens on 127.0.0.1 (port 0 = a free one, the default) and prints
// `listening http://127.0.0.1:PORT` as its first line (and writes PORT to --port-file), so a
// caller can wait for it. A request's path and query are appended to the upstream URL's path.
// Answers are relayed chunk by chunk as the upstream sends them (server-sent events reach the
// client as they are produced) and recorded in full once finished.
//
// Each file holds { seq, method, path, request: {headers, body_bytes, body}, response:
// {status, headers, body_bytes, body}, elapsed_ms }. A JSON body is stored parsed; anything else
// (an event stream included) as its raw text; bytes that are not UTF-8 as base64 (`body_base64`).
// Credentials (authorization, x-api-key, cookie, proxy-authorization) are replaced by
// "<redacted>". The request is written as soon as it is read, the answer added when it ends,
// so a client killed mid-answer still leaves its request behind; an answer cut short by either
// side is recorded as far as it came, with response.error saying so.
//
// Plain node, no dependencies. Stops on SIGTERM/SIGINT.
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import path from "node:path";
import zlib from "node:zlib";

const REDACTED_HEADERS = new Set(["authorization", "x-api-key", "cookie", "proxy-authorization"]);
// Hop-by-hop headers (RFC 9110 7.6.1) are the only ones not passed on.
const HOP_BY_HOP = new Set([
  "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
]);

function parseArgs(argv) {
  const args = { port: 0 };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${key} needs a value`);
    if (key === "--upstream") args.upstream = new URL(value);
    else if (key === "--out") args.out = value;
    else if (key === "--port") args.port = Number(value);
    else if (key === "--port-file") args.portFile = value;
    else throw new Error(`unknown option ${key}`);
  }
  if (!args.upstream || !args.out) {
    throw new Error("usage: node record_proxy.mjs --upstream URL --out OUTDIR [--port N] [--port-file FILE]");
  }
  return args;
}

function recordedHeaders(headers) {
  const out = {};
  for (const [name, value] of Object.entries(headers)) {
    out[name] = REDACTED_HEADERS.has(name) ? "<redacted>" : value;
  }
  return out;
}

// Undoes a content-encoding node can decode, for the record only (the bytes forwarded are
// the original ones). Returns null for an encoding it cannot decode.
function decoded(buffer, encoding) {
  try {
    switch ((encoding || "identity").toLowerCase()) {
      case "identity": return buffer;
      case "gzip": return zlib.gunzipSync(buffer);
      case "deflate": return zlib.inflateSync(buffer);
      case "br": return zlib.brotliDecompressSync(buffer);
      default: return null;
    }
  } catch {
    return null;
  }
}

function describeBody(buffer, headers) {
  const out = { body_bytes: buffer.length };
  if (buffer.length === 0) return out;
  const plain = decoded(buffer, headers["content-encoding"]);
  if (plain === null) {
    out.body_base64 = buffer.toString("base64");
    return out;
  }
  const text = plain.toString("utf8");
  if (!Buffer.from(text, "utf8").equals(plain)) {
    out.body_base64 = plain.toString("base64");
    return out;
  }
  const type = String(headers["content-type"] || "");
  if (type.includes("json")) {
    try {
      out.body = JSON.parse(text);
      return out;
    } catch {
      // Not valid JSON after all: kept as text below.
    }
  }
  out.body = text;
  return out;
}

function forwardHeaders(headers, upstream, bodyLength) {
  const out = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!HOP_BY_HOP.has(name)) out[name] = value;
  }
  out.host = upstream.host;
  if (bodyLength > 0 || "content-length" in headers) out["content-length"] = String(bodyLength);
  return out;
}

function upstreamPath(upstream, requestUrl) {
  const base = upstream.pathname.replace(/\/+$/, "");
  return base + requestUrl;
}

class Recorder {
  constructor(dir) {
    this.dir = dir;
    this.seq = 0;
    fs.mkdirSync(dir, { recursive: true });
  }

  next() {
    this.seq += 1;
    return this.seq;
  }

  write(record) {
    const name = path.join(this.dir, `${String(record.seq).padStart(3, "0")}.json`);
    fs.writeFileSync(name + ".tmp", JSON.stringify(record, null, 2) + "\n");
    fs.renameSync(name + ".tmp", name);
  }
}

function handle(args, recorder, req, res) {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const started = Date.now();
    const body = Buffer.concat(chunks);
    const record = {
      seq: recorder.next(),
      method: req.method,
      path: req.url,
      request: { headers: recordedHeaders(req.headers), ...describeBody(body, req.headers) },
      response: null,
    };
    recorder.write(record);
    const client = args.upstream.protocol === "https:" ? https : http;
    const up = client.request({
      protocol: args.upstream.protocol,
      hostname: args.upstream.hostname,
      port: args.upstream.port,
      method: req.method,
      path: upstreamPath(args.upstream, req.url),
      headers: forwardHeaders(req.headers, args.upstream, body.length),
    });
    up.on("response", (upRes) => relay(record, recorder, started, upRes, res));
    up.on("error", (err) => {
      record.response = { error: String(err.message || err) };
      record.elapsed_ms = Date.now() - started;
      recorder.write(record);
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(`record_proxy: upstream error: ${err.message}\n`);
    });
    up.end(body);
  });
}

function relay(record, recorder, started, upRes, res) {
  const headers = {};
  for (const [name, value] of Object.entries(upRes.headers)) {
    if (!HOP_BY_HOP.has(name)) headers[name] = value;
  }
  res.writeHead(upRes.statusCode, upRes.statusMessage, headers);
  res.flushHeaders();
  const chunks = [];
  upRes.on("data", (c) => {
    chunks.push(c);
    res.write(c);
  });
  let finished = false;
  const finish = (error) => {
    if (finished) return;
    finished = true;
    record.response = {
      status: upRes.statusCode,
      headers: upRes.headers,
      ...describeBody(Buffer.concat(chunks), upRes.headers),
    };
    if (error) record.response.error = error;
    record.elapsed_ms = Date.now() - started;
    recorder.write(record);
    res.end();
  };
  upRes.on("end", () => finish(null));
  upRes.on("error", (err) => finish(String(err.message || err)));
  // A client may hang up before the upstream ends its answer (Codex closes the stream once it
  // has read response.completed): what arrived until then is recorded, marked incomplete.
  upRes.on("close", () => finish(upRes.complete ? null : "incomplete: the connection closed before the answer ended"));
  res.on("close", () => {
    if (!upRes.complete) upRes.destroy();
  });
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const recorder = new Recorder(args.out);
  const server = http.createServer((req, res) => handle(args, recorder, req, res));
  server.listen(args.port, "127.0.0.1", () => {
    const { port } = server.address();
    if (args.portFile) fs.writeFileSync(args.portFile, `${port}\n`);
    process.stdout.write(`listening http://127.0.0.1:${port}\n`);
  });
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

main();
