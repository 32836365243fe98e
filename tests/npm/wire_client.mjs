// Drives kvgate's Anthropic Messages and OpenAI Responses routes with the official SDKs (npm
// "@anthropic-ai/sdk", as Claude Code uses it, and "openai", as Codex-style clients use it).
// usage: node wire_client.mjs BASE_URL API_KEY SCENARIO
//   BASE_URL is the server root (http://HOST:PORT): the Anthropic client adds /v1/… itself,
//   the OpenAI client is given BASE_URL/v1.
// Prints one JSON object with what the clients observed, on a line of its own; exits 0 unless
// the script itself breaks (assertions are made by the caller). A request that fails where
// none should is reported as {"thrown": …, "status": …} with the SDK's error body.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const [baseURL, apiKey, scenario] = process.argv.slice(2);
const anthropic = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const openai = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 120000 });
const model = "kvgate";
const system = "You are terse.";
const question = "Say a few words about rivers.";
const fileText = "rivers.txt: rivers run to the sea";

const anthropicTools = [
  {
    name: "read_file",
    description: "Read a file from the workspace",
    input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
];
const openaiTools = [
  {
    type: "function",
    name: "read_file",
    description: "Read a file from the workspace",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
];

// The fields of a Message the tests look at.
function message(m) {
  if (!m) return null;
  const { id, type, role, content, stop_reason, stop_sequence, usage } = m;
  return { id, type, role, content, stop_reason, stop_sequence, usage };
}

// The fields of a Response the tests look at (output_text as the SDK computes it).
function response(r) {
  if (!r) return null;
  const { id, object, status, incomplete_details, output, output_text, usage, previous_response_id } = r;
  return { id, object, status, incomplete_details, output, output_text, usage, previous_response_id };
}

// The stream's events, in order, and the text their deltas carry.
async function drainAnthropic(stream) {
  const events = [];
  let text = "";
  let partialJson = "";
  for await (const event of stream) {
    events.push(event.type);
    if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text;
    if (event.type === "content_block_delta" && event.delta.type === "input_json_delta") {
      partialJson += event.delta.partial_json;
    }
  }
  return { events, streamed_text: text, streamed_input_json: partialJson, final: message(await stream.finalMessage()) };
}

async function drainResponses(stream) {
  const events = [];
  const sequence_numbers = [];
  let text = "";
  for await (const event of stream) {
    events.push(event.type);
    sequence_numbers.push(event.sequence_number ?? null);
    if (event.type === "response.output_text.delta") text += event.delta;
  }
  return { events, sequence_numbers, streamed_text: text, final: response(await stream.finalResponse()) };
}

const createRequest = { model, system, messages: [{ role: "user", content: question }], max_tokens: 8 };

// The tool round trip: a forced tool_use, then its tool_result (same id) answered.
async function anthropicToolRoundTrip(streamed) {
  const user = { role: "user", content: "Read rivers.txt" };
  const first = { model, messages: [user], tools: anthropicTools, tool_choice: { type: "any" }, max_tokens: 64 };
  const call = streamed ? await drainAnthropic(anthropic.messages.stream(first)) : null;
  const firstMessage = streamed ? call.final : message(await anthropic.messages.create(first));
  const use = firstMessage?.content?.find((b) => b.type === "tool_use");
  if (!use) return { first: call ?? firstMessage, second: null };
  const result = { type: "tool_result", tool_use_id: use.id, content: fileText };
  const second = {
    model, tools: anthropicTools, max_tokens: 8,
    messages: [user, { role: "assistant", content: firstMessage.content }, { role: "user", content: [result] }],
  };
  if (streamed) return { first: call, second: await drainAnthropic(anthropic.messages.stream(second)) };
  return { first: firstMessage, second: message(await anthropic.messages.create(second)) };
}

async function anthropicError() {
  const attempts = {
    no_max_tokens: { model, messages: [{ role: "user", content: question }] },
    no_messages: { model, messages: [], max_tokens: 8 },
  };
  const out = {};
  for (const [name, body] of Object.entries(attempts)) {
    try {
      const m = await anthropic.messages.create(body);
      out[name] = { error: null, answered: message(m) };
    } catch (e) {
      out[name] = { status: e.status ?? null, type: e.error?.error?.type ?? null, body: e.error ?? null, message: e.message };
    }
  }
  return out;
}

async function openaiToolRoundTrip() {
  const user = { role: "user", content: "Read rivers.txt" };
  const first = await openai.responses.create({
    model, input: [user], tools: openaiTools, tool_choice: "required", max_output_tokens: 64,
  });
  const call = first.output.find((i) => i.type === "function_call");
  if (!call) return { first: response(first), second: null };
  const second = await openai.responses.create({
    model, tools: openaiTools, max_output_tokens: 16,
    input: [user, call, { type: "function_call_output", call_id: call.call_id, output: fileText }],
  });
  return { first: response(first), second: response(second) };
}

async function openaiContinue() {
  // A question no other scenario asks: what the second turn reuses is this conversation's.
  const first = await openai.responses.create({
    model, instructions: system, input: "Say a few words about lakes.", store: true, max_output_tokens: 16,
  });
  const second = await openai.responses.create({
    model, instructions: system, previous_response_id: first.id, input: "And about lakes?", max_output_tokens: 16,
  });
  const retrieved = await openai.responses.retrieve(first.id);
  return { first: response(first), second: response(second), retrieved: response(retrieved) };
}

async function models() {
  const a = (await anthropic.models.list()).data;
  const o = (await openai.models.list()).data;
  const out = { anthropic: { list: a }, openai: { list: o } };
  if (a.length > 0) out.anthropic.retrieved = await anthropic.models.retrieve(a[0].id);
  if (o.length > 0) out.openai.retrieved = await openai.models.retrieve(o[0].id);
  return out;
}

async function run() {
  switch (scenario) {
    case "anthropic-create":
      return message(await anthropic.messages.create(createRequest));
    case "anthropic-stream":
      return drainAnthropic(anthropic.messages.stream({ ...createRequest, max_tokens: 12 }));
    case "anthropic-tools":
      return anthropicToolRoundTrip(false);
    case "anthropic-tools-stream":
      return anthropicToolRoundTrip(true);
    case "anthropic-count": {
      const { max_tokens, ...countRequest } = createRequest;
      const count = await anthropic.messages.countTokens(countRequest);
      const created = await anthropic.messages.create(createRequest);
      return { count, usage: created.usage };
    }
    case "anthropic-error":
      return anthropicError();
    case "openai-responses-create":
      return response(await openai.responses.create({ model, input: question, instructions: system, max_output_tokens: 16 }));
    case "openai-responses-stream":
      return drainResponses(openai.responses.stream({ model, input: question, instructions: system, max_output_tokens: 16 }));
    case "openai-responses-tools":
      return openaiToolRoundTrip();
    case "openai-responses-continue":
      return openaiContinue();
    case "openai-input-tokens": {
      const request = { model, input: question, instructions: system };
      const counted = await openai.responses.inputTokens.count(request);
      const created = await openai.responses.create({ ...request, max_output_tokens: 16 });
      return { counted, usage: created.usage };
    }
    case "models":
      return models();
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

let result;
try {
  result = await run();
} catch (e) {
  result = { thrown: String(e?.stack ?? e), status: e?.status ?? null, error: e?.error ?? null };
}
process.stdout.write(`\n${JSON.stringify(result)}\n`);
