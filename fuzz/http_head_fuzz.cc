// libFuzzer target: kvgate's HTTP request head parser and chunked body decoder, on bytes from
// the network. Nothing may crash. A head that parses is consistent (method, a path starting
// with '/', lower-case header names, head_bytes within the input) and every shorter prefix of
// it asks for more bytes (a client sending slowly is never refused early). The chunked decoder
// gives the same body and state however the bytes are cut, and never exceeds its limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/http_message.h"

namespace {

using namespace kvgate::gateway;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 13;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  HeadLimits limits;
  limits.max_head_bytes = 2048;
  limits.max_target_bytes = 512;
  limits.max_headers = 16;
  const HeadParse full = parse_request_head(input, limits);
  if (full.state == HeadParse::State::kError) {
    check(full.error.status >= 400 && full.error.status < 600 && !full.error.message.empty());
  }
  if (full.state == HeadParse::State::kDone) {
    const ParsedHead& h = full.head;
    check(h.head_bytes <= input.size());
    check(!h.request.method.empty());
    check(!h.request.path.empty() || h.request.target.front() == '/');
    check(!h.request.target.empty() && h.request.target.front() == '/');
    for (const auto& [name, value] : h.request.headers) {
      for (char c : name) check(!(c >= 'A' && c <= 'Z'));
    }
    check(!(h.body_kind == BodyKind::kChunked && h.content_length != 0));
    for (size_t n = 0; n < h.head_bytes; n += piece) {
      const HeadParse part = parse_request_head(input.substr(0, n), limits);
      check(part.state == HeadParse::State::kIncomplete);
    }
    (void)h.request.query_param("a");
    (void)h.request.keep_alive();
    // The rest as a chunked body, whole and in pieces.
    const std::string_view rest = input.substr(h.head_bytes);
    const size_t limit = 1 + data[0] * 8u;
    ChunkedDecoder whole(limit), cut(limit);
    std::string a, b;
    const size_t used = whole.feed(rest, a);
    check(used <= rest.size());
    size_t cut_used = 0;
    for (size_t at = 0; at < rest.size() && cut.state() == ChunkedDecoder::State::kNeedMore; at += piece) {
      cut_used += cut.feed(rest.substr(at, std::min(piece, rest.size() - at)), b);
    }
    check(cut.state() == whole.state());
    check(cut_used == used);
    check(a == b);
    check(a.size() <= limit && b.size() <= limit);
    if (whole.state() == ChunkedDecoder::State::kDone && cut.state() == ChunkedDecoder::State::kDone)
      check(a == b);
  }
  (void)percent_decode(input);
  return 0;
}
