// Drives kvgate with the official OpenAI client (npm "openai"), as agent frameworks do.
// usage: node openai_client.mjs BASE_URL API_KEY SCENARIO
// Prints one JSON object with what the client observed; exits 0 unless the script itself
// breaks (assertions are made by the caller).
import OpenAI from "openai";

const [baseURL, apiKey, scenario, biasArg] = process.argv.slice(2);
// Token biases that make a random-weight model answer with plain words (OpenAI's
// logit_bias format: token id → bias); see the e2e test support.
const logit_bias = biasArg ? JSON.parse(biasArg) : undefined;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Say a few words about rivers." },
];
const tools = [
  {
    type: "function",
    function: {
      name: "read_file",
      description: "Read a file from the workspace",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    },
  },
];

async function run() {
  switch (scenario) {
    case "chat": {
      const r = await client.chat.completions.create({ model: "kvgate", messages, max_tokens: 8, logit_bias });
      return { content: r.choices[0].message.content, usage: r.usage, finish: r.choices[0].finish_reason };
    }
    case "stream": {
      const stream = await client.chat.completions.create({
        model: "kvgate", messages, max_tokens: 12, logit_bias, stream: true, stream_options: { include_usage: true },
      });
      let text = "";
      let chunks = 0;
      let usage = null;
      for await (const chunk of stream) {
        chunks++;
        if (chunk.usage) usage = chunk.usage;
        text += chunk.choices?.[0]?.delta?.content ?? "";
      }
      return { content: text, chunks, usage };
    }
    case "tools": {
      const r = await client.chat.completions.create({
        model: "kvgate", messages: [{ role: "user", content: "Read a.txt" }], tools, tool_choice: "required", max_tokens: 64,
      });
      return { message: r.choices[0].message, finish: r.choices[0].finish_reason };
    }
    case "tools-stream": {
      const stream = await client.chat.completions.create({
        model: "kvgate", messages: [{ role: "user", content: "Read a.txt" }], tools, tool_choice: "required",
        max_tokens: 64, stream: true,
      });
      const calls = {};
      for await (const chunk of stream) {
        for (const tc of chunk.choices?.[0]?.delta?.tool_calls ?? []) {
          calls[tc.index] ??= { name: "", arguments: "" };
          if (tc.function?.name) calls[tc.index].name += tc.function.name;
          if (tc.function?.arguments) calls[tc.index].arguments += tc.function.arguments;
        }
      }
      return { calls: Object.values(calls) };
    }
    case "bad-request": {
      try {
        await client.chat.completions.create({ model: "kvgate", messages: [{ role: "wizard", content: "x" }] });
        return { error: null };
      } catch (e) {
        return { status: e.status, type: e.error?.type ?? e.type, param: e.error?.param ?? e.param, message: e.message };
      }
    }
    case "after-error": {
      // A failed request must not poison the client's next one.
      try {
        await client.chat.completions.create({ model: "kvgate", messages: [{ role: "wizard", content: "x" }] });
      } catch (e) {}
      const r = await client.chat.completions.create({ model: "kvgate", messages, max_tokens: 4, logit_bias });
      return { content: r.choices[0].message.content };
    }
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

try {
  process.stdout.write(JSON.stringify(await run()));
} catch (e) {
  process.stdout.write(JSON.stringify({ thrown: String(e), status: e.status ?? null }));
}
