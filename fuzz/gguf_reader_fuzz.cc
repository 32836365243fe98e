// libFuzzer target: the GGUF reader on arbitrary bytes. Parsing must return a value or an
// error, never crash, hang or allocate without bound; for files that parse, every Value
// accessor and every tensor's data view must stay in bounds.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::span(reinterpret_cast<const std::byte*>(data), size);
  auto file = kvgate::gguf::File::parse(bytes);
  if (!file.ok()) return 0;
  size_t sink = 0;
  for (const auto& kv : file->metadata()) {
    sink += kv.value.to_display(200).size();
    if (auto ints = kv.value.as_int_array()) sink += ints->size();
    if (auto strs = kv.value.as_string_array()) sink += strs->size();
  }
  for (const auto& t : file->tensors()) {
    auto d = file->tensor_data(t);
    if (!d.empty()) sink += static_cast<size_t>(d[0]) + static_cast<size_t>(d[d.size() - 1]);
  }
  return sink == 0xdeadbeef ? 1 : 0;
}
