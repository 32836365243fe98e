// Dumps a GGUF file's metadata and tensor infos as canonical JSON, using the independent
// @huggingface/gguf parser. kvgate's reader is compared against this output in tests.
// usage: node gguf_dump.mjs FILE
import { gguf } from "@huggingface/gguf";

const { typedMetadata, tensorInfos } = await gguf(process.argv[2], { allowLocalFile: true, typedMetadata: true });
const skip = new Set(["version", "tensor_count", "kv_count"]);
const metadata = {};
for (const [key, entry] of Object.entries(typedMetadata)) {
  if (skip.has(key)) continue;
  const out = { type: entry.type };
  if (Array.isArray(entry.value)) {
    out.element_type = entry.subType;
    out.count = entry.value.length;
  }
  out.value = entry.value;
  metadata[key] = out;
}
const tensors = tensorInfos.map((t) => ({ name: t.name, dims: t.shape, type: t.dtype, offset: t.offset }));
const header = { version: typedMetadata.version.value, tensor_count: typedMetadata.tensor_count.value };
process.stdout.write(
  JSON.stringify({ header, metadata, tensors }, (_, v) => (typeof v === "bigint" ? v.toString() : v)),
);
