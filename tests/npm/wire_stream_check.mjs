// Reads Server-Sent Event streams written by kvgate's wire encoders (src/wire) with the
// official SDKs' own stream parsers and accumulators, as Claude Code (Anthropic SDK) and
// Codex-style clients (OpenAI SDK, Responses API) do.
// usage: node wire_stream_check.mjs anthropic|responses FILE...
// Prints one JSON array, one entry per FILE: {"final": …} with the message / response the
// SDK accumulated (for responses also "streamed_output", the output built from the item
// events before the terminal event replaced it), or {"thrown": "…"} when the SDK rejected
// the stream. Exits 0 unless the script itself breaks.
import { readFileSync } from "node:fs";
import { Stream as AnthropicStream } from "@anthropic-ai/sdk/streaming";
import { MessageStream } from "@anthropic-ai/sdk/lib/MessageStream";
import { Stream as OpenAIStream } from "openai/streaming";
import { accumulateResponse } from "openai/lib/responses/ResponseAccumulator";

const [format, ...files] = process.argv.slice(2);

function sseResponse(file) {
  return new Response(readFileSync(file), { headers: { "content-type": "text/event-stream" } });
}

async function anthropic(file) {
  const events = AnthropicStream.fromSSEResponse(sseResponse(file), new AbortController());
  const stream = MessageStream.fromReadableStream(events.toReadableStream());
  const final = await stream.finalMessage();
  return { final };
}

async function responses(file) {
  const events = OpenAIStream.fromSSEResponse(sseResponse(file), new AbortController());
  let snapshot;
  let streamed_output = null;
  for await (const event of events) {
    if (["response.completed", "response.incomplete", "response.failed"].includes(event.type)) {
      streamed_output = structuredClone(snapshot.output);
    }
    snapshot = accumulateResponse(event, snapshot);
  }
  return { final: snapshot, streamed_output };
}

const results = [];
for (const file of files) {
  try {
    results.push(format === "anthropic" ? await anthropic(file) : await responses(file));
  } catch (e) {
    results.push({ thrown: String(e?.stack ?? e) });
  }
}
process.stdout.write(JSON.stringify(results));
