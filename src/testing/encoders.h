// Request-body encoders for tests, straight from zlib and libzstd (what clients use), so
// tests of kvgate's decoder do not encode with kvgate's own code.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <zlib.h>
#include <zstd.h>

namespace kvgate::testing {

// window_bits: 16 + MAX_WBITS gzip, MAX_WBITS zlib-wrapped deflate, -MAX_WBITS raw deflate.
inline std::string deflate_with(std::string_view in, int window_bits) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib");
  std::string out(deflateBound(&z, static_cast<uLong>(in.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
  return out;
}
inline std::string gzip(std::string_view in) { return deflate_with(in, 16 + MAX_WBITS); }

inline std::string zstd(std::string_view in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  if (ZSTD_isError(n)) throw std::runtime_error("zstd");
  out.resize(n);
  return out;
}

}  // namespace kvgate::testing
