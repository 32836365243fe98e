// libFuzzer target: kvgate's HTTP request head parser and chunked body decoder, on bytes from
// the network. Nothing may crash. A head that parses is consistent (method, a path starting
// with '/', lower-case header names, head_bytes within the input) and every shorter prefix of
// it asks for more bytes (a client sending slowly is never refused early). The chunked decoder
// gives the same body and state however the bytes are cut, and never exceeds its limit. The
// whole input is also decoded as a chunked body under small limits on chunk-size lines
// (extensions) and trailers: the same outcome however it is cut, every consumed byte either
// payload or framing, and no more bytes consumed than the limits allow past the last chunk.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/http_message.h"

namespace {

using namespace kvgate::http;

void check(bool ok) {
  if (!ok) std::abort();
}

// The input as a chunked body with small limits chosen by `selector`, whole and cut.
void check_chunked_framing(std::string_view input, uint8_t selector, size_t piece) {
  const ChunkedLimits limits{.max_body = 1 + selector * 4u,
                             .max_size_line = 1 + selector % 40u,
                             .max_trailer_bytes = 1 + selector % 64u,
                             .max_trailers = selector % 5u};
  ChunkedDecoder whole(limits), cut(limits);
  std::string a, b;
  const size_t used = whole.feed(input, a);
  check(used <= input.size());
  check(a.size() <= limits.max_body);
  check(whole.framing_bytes() + a.size() == used);
  size_t cut_used = 0;
  for (size_t at = 0; at < input.size() && cut.state() == ChunkedDecoder::State::kNeedMore; at += piece) {
    cut_used += cut.feed(input.substr(at, std::min(piece, input.size() - at)), b);
  }
  check(cut.state() == whole.state() && cut_used == used && a == b && cut.error() == whole.error());
  const bool failed = whole.state() != ChunkedDecoder::State::kNeedMore && whole.state() != ChunkedDecoder::State::kDone;
  check(failed == !whole.error().empty());
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
  check_chunked_framing(input, data[0], piece);
  (void)percent_decode(input);
  return 0;
}
