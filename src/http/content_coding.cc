#include "http/content_coding.h"

#include <memory>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>

#include "util/strings.h"
#include "util/utf8.h"

namespace kvgate::http {
namespace {

constexpr size_t kMaxCodings = 4;
constexpr size_t kStep = 64 * 1024;

CodingError too_large(std::string_view coding, size_t max_bytes) {
  return {413, fmt::format("more than {} bytes (the limit) once {}-decoded", max_bytes, coding)};
}

// zlib's inflate for gzip (window bits 16+15), zlib-wrapped deflate (15) or raw deflate (-15).
Result<std::string, CodingError> inflate_with(std::string_view in, int window_bits, std::string_view coding,
                                              size_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, window_bits) != Z_OK) return CodingError{500, "zlib could not start"};
  std::unique_ptr<z_stream, int (*)(z_stream*)> end(&z, inflateEnd);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (out.size() >= max_bytes + 1) return too_large(coding, max_bytes);
    const size_t room = std::min(kStep, max_bytes + 1 - out.size());
    const size_t before = out.size();
    out.resize(before + room);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + before);
    z.avail_out = static_cast<uInt>(room);
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(before + room - z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0)
      return CodingError{400, fmt::format("{} data is truncated", coding)};
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      return CodingError{400,
                         fmt::format("{} data is corrupt: {}", coding, z.msg ? z.msg : "inflate failed")};
    }
  }
  if (out.size() > max_bytes) return too_large(coding, max_bytes);
  if (z.avail_in != 0) return CodingError{400, fmt::format("{} data has bytes after its end", coding)};
  return out;
}

Result<std::string, CodingError> unzstd(std::string_view in, size_t max_bytes) {
  std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> d(ZSTD_createDStream(), ZSTD_freeDStream);
  if (!d) return CodingError{500, "zstd could not start"};
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  std::string out;
  size_t rc = 1;
  while (input.pos < input.size || rc != 0) {
    if (out.size() > max_bytes) return too_large("zstd", max_bytes);
    const size_t room = std::min(kStep, max_bytes + 1 - out.size());
    const size_t before = out.size();
    out.resize(before + room);
    ZSTD_outBuffer output{out.data() + before, room, 0};
    const size_t consumed_before = input.pos;
    rc = ZSTD_decompressStream(d.get(), &output, &input);
    out.resize(before + output.pos);
    if (ZSTD_isError(rc))
      return CodingError{400, fmt::format("zstd data is corrupt: {}", ZSTD_getErrorName(rc))};
    if (rc != 0 && input.pos == input.size && output.pos == 0 && input.pos == consumed_before) {
      return CodingError{400, "zstd data is truncated"};
    }
  }
  if (out.size() > max_bytes) return too_large("zstd", max_bytes);
  return out;
}

Result<std::string, CodingError> decode_one(std::string_view coding, std::string body, size_t max_bytes) {
  if (coding == "gzip" || coding == "x-gzip") return inflate_with(body, 16 + MAX_WBITS, "gzip", max_bytes);
  if (coding == "zstd") return unzstd(body, max_bytes);
  if (coding == "deflate") {
    // RFC 9110's "deflate" is zlib-wrapped; some clients send raw deflate data instead.
    auto wrapped = inflate_with(body, MAX_WBITS, "deflate", max_bytes);
    if (wrapped.ok() || wrapped.error().status == 413) return wrapped;
    return inflate_with(body, -MAX_WBITS, "deflate", max_bytes);
  }
  return CodingError{415,
                     fmt::format("Content-Encoding '{}' is not supported (gzip, deflate, zstd or identity)",
                                 util::sanitize_utf8(coding.substr(0, 40)))};
}

}  // namespace

Result<std::string, CodingError> decode_content(std::string_view encoding, std::string body,
                                                size_t max_bytes) {
  std::vector<std::string> codings;
  while (!encoding.empty()) {
    const size_t comma = encoding.find(',');
    std::string token = util::ascii_lower(util::trim_blanks(encoding.substr(0, comma)));
    encoding = comma == std::string_view::npos ? std::string_view() : encoding.substr(comma + 1);
    if (token.empty() || token == "identity") continue;
    codings.push_back(std::move(token));
  }
  if (codings.size() > kMaxCodings) {
    return CodingError{415, fmt::format("Content-Encoding lists {} codings; at most {} are decoded",
                                        codings.size(), kMaxCodings)};
  }
  for (auto it = codings.rbegin(); it != codings.rend(); ++it) {
    auto decoded = decode_one(*it, std::move(body), max_bytes);
    if (!decoded.ok()) return decoded;
    body = std::move(decoded).value();
  }
  return body;
}

}  // namespace kvgate::http
