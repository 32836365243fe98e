#include "gguf/file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>

#include "gguf/writer.h"

namespace kvgate::gguf {
namespace {

// A small but complete file: every scalar type, strings, arrays, a nested array, and
// tensors of several types with data.
Writer sample_writer() {
  Writer w;
  EXPECT_TRUE(w.add_string("general.architecture", "llama").ok());
  EXPECT_TRUE(w.add_u32("general.alignment", 32).ok());
  EXPECT_TRUE(w.add_u32("llama.block_count", 2).ok());
  EXPECT_TRUE(w.add_i32("test.i32", -7).ok());
  EXPECT_TRUE(w.add_u64("test.u64", 1ULL << 40).ok());
  EXPECT_TRUE(w.add_f32("test.f32", 0.5F).ok());
  EXPECT_TRUE(w.add_bool("test.bool", true).ok());
  const uint32_t heads[] = {4, 2};
  EXPECT_TRUE(w.add_u32_array("llama.attention.head_count_kv", heads).ok());
  const std::string tokens[] = {"a", "bc", "<|im_end|>"};
  EXPECT_TRUE(w.add_string_array("tokenizer.ggml.tokens", tokens).ok());
  // Nested: array of 2 arrays of i32 ({1,2}, {3}).
  std::vector<std::byte> nested;
  auto put = [&nested](auto v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    nested.insert(nested.end(), p, p + sizeof(v));
  };
  put(uint32_t{9});
  put(uint64_t{2});
  put(uint32_t{5});
  put(uint64_t{2});
  put(int32_t{1});
  put(int32_t{2});
  put(uint32_t{5});
  put(uint64_t{1});
  put(int32_t{3});
  EXPECT_TRUE(w.add_raw("test.nested", ValueType::ARRAY, nested).ok());
  auto fill = [](std::span<std::byte> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(i * 7 + 1);
  };
  EXPECT_TRUE(w.add_tensor("token_embd.weight", GgmlType::F16, {8, 3}, fill).ok());
  EXPECT_TRUE(w.add_tensor("blk.0.attn_q.weight", GgmlType::Q8_0, {32, 2}, fill).ok());
  EXPECT_TRUE(w.add_tensor("output_norm.weight", GgmlType::F32, {8}, fill).ok());
  return w;
}

std::vector<std::byte> sample_bytes() {
  const auto path = std::filesystem::temp_directory_path() / ("kvgate_sample_" + std::to_string(::getpid()) + ".gguf");
  EXPECT_TRUE(sample_writer().write(path).ok());
  std::vector<std::byte> bytes(std::filesystem::file_size(path));
  FILE* f = std::fopen(path.string().c_str(), "rb");
  EXPECT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  std::filesystem::remove(path);
  return bytes;
}

TEST(GgufFileTest, RoundTripsEveryValueType) {
  auto file = File::parse(sample_bytes());
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->version(), 3U);
  EXPECT_EQ(file->architecture(), "llama");
  EXPECT_EQ(file->get_uint("llama.block_count"), 2U);
  EXPECT_EQ(file->find("test.i32")->as_int(), -7);
  EXPECT_EQ(file->get_uint("test.u64"), 1ULL << 40);
  EXPECT_EQ(file->get_float("test.f32"), 0.5);
  EXPECT_EQ(file->get_bool("test.bool"), true);
  auto heads = file->find("llama.attention.head_count_kv")->as_int_array();
  ASSERT_TRUE(heads);
  EXPECT_EQ(*heads, (std::vector<int64_t>{4, 2}));
  auto tokens = file->find("tokenizer.ggml.tokens")->as_string_array();
  ASSERT_TRUE(tokens);
  EXPECT_EQ(*tokens, (std::vector<std::string_view>{"a", "bc", "<|im_end|>"}));
  const Value* nested = file->find("test.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->element_type(), ValueType::ARRAY);
  ASSERT_EQ(nested->size(), 2U);
  std::vector<std::vector<int64_t>> inner;
  for (Value v : *nested) inner.push_back(*v.as_int_array());
  EXPECT_EQ(inner, (std::vector<std::vector<int64_t>>{{1, 2}, {3}}));
  EXPECT_EQ(nested->to_display(), "[array × 2: [i32 × 2: 1, 2], [i32 × 1: 3]]");
}

TEST(GgufFileTest, TensorInfosAndData) {
  auto file = File::parse(sample_bytes());
  ASSERT_TRUE(file.ok()) << file.error().message();
  ASSERT_EQ(file->tensors().size(), 3U);
  const TensorInfo* q = file->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GgmlType::Q8_0);
  EXPECT_EQ(q->n_dims, 2U);
  EXPECT_EQ(q->ne[0], 32U);
  EXPECT_EQ(q->ne[1], 2U);
  EXPECT_EQ(q->n_bytes, 68U);
  EXPECT_EQ(q->offset % 32, 0U);
  EXPECT_EQ(file->data_offset() % 32, 0U);
  auto data = file->tensor_data(*q);
  ASSERT_EQ(data.size(), 68U);
  EXPECT_EQ(data[1], std::byte{8});
  EXPECT_FALSE(file->metadata_only());
  EXPECT_EQ(file->tensor_bytes(), 8U * 3 * 2 + 68 + 32);
}

TEST(GgufFileTest, MetadataOnlyFile) {
  const auto path = std::filesystem::temp_directory_path() / "kvgate_meta_only.gguf";
  ASSERT_TRUE(sample_writer().write(path, /*metadata_only=*/true).ok());
  auto file = File::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_TRUE(file->metadata_only());
  EXPECT_EQ(file->get_bool(kMetadataOnlyKey), true);
  EXPECT_EQ(file->tensors().size(), 3U);
  EXPECT_TRUE(file->tensor_data(file->tensors()[0]).empty());
  std::filesystem::remove(path);
}

TEST(GgufFileTest, MissingDataWithoutMarkerIsTruncation) {
  auto bytes = sample_bytes();
  auto file = File::parse(bytes);
  ASSERT_TRUE(file.ok());
  bytes.resize(static_cast<size_t>(file->data_offset() + 10));
  auto truncated = File::parse(bytes);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().message().find("truncated"), std::string::npos) << truncated.error().message();
  EXPECT_NE(truncated.error().message().find("token_embd.weight"), std::string::npos);
}

TEST(GgufFileTest, ClearErrors) {
  auto expect_error = [](std::vector<std::byte> bytes, std::string_view needle) {
    auto f = File::parse(bytes);
    ASSERT_FALSE(f.ok()) << needle;
    EXPECT_NE(f.error().message().find(needle), std::string::npos) << f.error().message();
  };
  auto bytes = sample_bytes();
  {
    auto b = bytes;
    b[0] = std::byte{'X'};
    expect_error(b, "not a GGUF file (expected magic 'GGUF', found 'XGUF')");
  }
  {
    auto b = bytes;
    b[4] = std::byte{1};
    expect_error(b, "GGUF version 1 is not supported");
  }
  {
    auto b = bytes;
    b[4] = std::byte{0};
    b[7] = std::byte{3};
    expect_error(b, "big-endian");
  }
  {
    auto b = bytes;
    std::fill_n(b.begin() + 16, 8, std::byte{0xff});
    expect_error(b, "offset 16: metadata count 18446744073709551615 is impossible");
  }
  {
    auto b = bytes;
    std::fill_n(b.begin() + 8, 8, std::byte{0x7f});
    expect_error(b, "tensor count");
  }
  expect_error({}, "offset 0: expected the GGUF magic");
}

TEST(GgufFileTest, DuplicateKeyAndTensorRejected) {
  Writer w;
  ASSERT_TRUE(w.add_u32("a.b", 1).ok());
  EXPECT_FALSE(w.add_u32("a.b", 2).ok());
  // Craft a duplicate by renaming one key in the encoded bytes: "a.b" and "a.c" → "a.b" twice.
  ASSERT_TRUE(w.add_u32("a.c", 2).ok());
  auto header = w.encode_header();
  for (size_t i = 0; i + 3 <= header.size(); ++i) {
    if (std::memcmp(header.data() + i, "a.c", 3) == 0) header[i + 2] = std::byte{'b'};
  }
  auto f = File::parse(header);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message().find("duplicate metadata key 'a.b'"), std::string::npos) << f.error().message();

  Writer t;
  auto fill = [](std::span<std::byte>) {};
  ASSERT_TRUE(t.add_tensor("x.weight", GgmlType::F32, {4}, fill).ok());
  EXPECT_FALSE(t.add_tensor("x.weight", GgmlType::F32, {4}, fill).ok());
  ASSERT_TRUE(t.add_tensor("y.weight", GgmlType::F32, {4}, fill).ok());
  auto theader = t.encode_header(true);
  for (size_t i = 0; i + 8 <= theader.size(); ++i) {
    if (std::memcmp(theader.data() + i, "y.weight", 8) == 0) theader[i] = std::byte{'x'};
  }
  auto g = File::parse(theader);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message().find("duplicate tensor name 'x.weight'"), std::string::npos) << g.error().message();
}

TEST(GgufFileTest, RejectsBadTensorShapesAndTypes) {
  Writer w;
  auto fill = [](std::span<std::byte>) {};
  EXPECT_FALSE(w.add_tensor("q", GgmlType::Q8_0, {30}, fill).ok());  // not a block multiple
  EXPECT_FALSE(w.add_tensor("z", GgmlType::F32, {4, 0}, fill).ok());
  EXPECT_FALSE(w.add_tensor("five", GgmlType::F32, {1, 1, 1, 1, 1}, fill).ok());
  EXPECT_FALSE(w.add_tensor(std::string(64, 'n'), GgmlType::F32, {1}, fill).ok());
}

// Every truncation length of a small file gives an error (never a crash) — except the full
// length. Run under ASan/UBSan in the sanitizer build.
TEST(GgufCorruptionTest, EveryTruncationIsAnError) {
  const auto bytes = sample_bytes();
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto f = File::parse(std::span(bytes).first(len));
    // Truncating only the trailing alignment padding leaves every tensor intact.
    if (f.ok()) {
      EXPECT_GE(len, f->data_offset() + f->data_size()) << "len " << len;
    } else {
      EXPECT_FALSE(f.error().message().empty());
    }
  }
  EXPECT_TRUE(File::parse(bytes).ok());
}

// Every single-byte corruption of the header (several values per byte) either parses or
// gives an error with an offset; never a crash, hang or huge allocation.
TEST(GgufCorruptionTest, EveryHeaderByteCorrupted) {
  const auto bytes = sample_bytes();
  auto clean = File::parse(bytes);
  ASSERT_TRUE(clean.ok());
  const size_t header = static_cast<size_t>(clean->header_size());
  size_t errors = 0;
  for (size_t i = 0; i < header; ++i) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x7f}, uint8_t{0x80},
                      static_cast<uint8_t>(static_cast<uint8_t>(bytes[i]) ^ 0x01),
                      static_cast<uint8_t>(static_cast<uint8_t>(bytes[i]) + 0x10)}) {
      auto b = bytes;
      b[i] = static_cast<std::byte>(v);
      auto f = File::parse(b);
      if (!f.ok()) {
        ++errors;
        EXPECT_FALSE(f.error().message().empty());
      }
    }
  }
  EXPECT_GT(errors, header);  // most corruptions are detected
}

TEST(GgufCorruptionTest, RandomGarbageNeverCrashes) {
  std::mt19937_64 rng(42);
  const auto bytes = sample_bytes();
  for (int round = 0; round < 2000; ++round) {
    auto b = bytes;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<std::byte>(rng());
    b.resize(rng() % (b.size() + 1));
    auto f = File::parse(b);
    (void)f;
  }
}

TEST(GgufFileTest, OpenNamesThePath) {
  auto f = File::open("/nonexistent/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message().find("/nonexistent/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::gguf
