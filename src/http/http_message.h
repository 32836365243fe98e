// HTTP/1.1 request parsing for kvgate's own server (pure functions, no I/O).
//
// parse_request_head() looks at the bytes received so far and either asks for more, fails
// with a status to answer (400 malformed, 414 URI too long, 431 headers too large, 501
// unsupported transfer coding, 505 version), or returns the request line and headers and
// where the body starts. Header names are lower-cased; values are trimmed. Only
// "Transfer-Encoding: chunked" and Content-Length bodies are supported; both at once is a
// 400 (request smuggling defence), and so is a second Host header. Bytes that cannot begin
// a request line (a TLS ClientHello starts with 0x16) fail at once, before the head is
// complete, so a client speaking another protocol is answered 400 instead of waiting out
// the head time-out.
//
// ChunkedDecoder decodes a chunked body incrementally, enforcing limits on the payload, on
// each chunk-size line (extensions included) and on the trailer section (counted against
// the head limits, like headers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvgate::http {

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: "/v1/models?x=1"
  std::string path;    // "/v1/models" (percent-decoded, no query)
  std::string query;   // "x=1"
  int version_minor = 1;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::string remote;  // "127.0.0.1:53122"

  std::optional<std::string_view> header(std::string_view lower_name) const;
  // The value of a query parameter (not decoded beyond '+' and %XX), if present.
  std::optional<std::string> query_param(std::string_view name) const;
  bool keep_alive() const;
};

struct HeadLimits {
  size_t max_head_bytes = 64 * 1024;
  size_t max_target_bytes = 16 * 1024;
  size_t max_headers = 100;
};

enum class BodyKind { kNone, kLength, kChunked };

struct ParsedHead {
  HttpRequest request;
  size_t head_bytes = 0;  // bytes of the request line + headers + blank line
  BodyKind body_kind = BodyKind::kNone;
  uint64_t content_length = 0;
  bool expect_continue = false;
};

struct HeadError {
  int status;
  std::string message;
};

struct HeadParse {
  enum class State { kIncomplete, kDone, kError } state = State::kIncomplete;
  ParsedHead head;
  HeadError error{0, ""};
};

HeadParse parse_request_head(std::string_view data, const HeadLimits& limits);

// Decodes "%2F" and friends; invalid escapes are kept as they are.
std::string percent_decode(std::string_view s);

struct ChunkedLimits {
  size_t max_body = 64 * 1024 * 1024;  // decoded payload bytes
  size_t max_size_line = 1024;         // one chunk-size line, extensions included (its CRLF not)
  size_t max_trailer_bytes = 64 * 1024;
  size_t max_trailers = 100;
};

class ChunkedDecoder {
 public:
  explicit ChunkedDecoder(size_t max_body) : ChunkedDecoder(ChunkedLimits{.max_body = max_body}) {}
  explicit ChunkedDecoder(ChunkedLimits limits) : limits_(limits) {}
  // kError: malformed (400); kTooLarge: payload over max_body (413); kTrailersTooLarge:
  // trailer section over its limits (431). error() says which limit or what was malformed.
  enum class State { kNeedMore, kDone, kError, kTooLarge, kTrailersTooLarge };
  // Consumes bytes from `in` (appending decoded data to `out`) and returns how many bytes were
  // consumed; state() says whether the body is complete.
  size_t feed(std::string_view in, std::string& out);
  State state() const { return state_; }
  const std::string& error() const { return error_; }
  // Bytes consumed that were framing, not payload (size lines, extensions, CRLFs, trailers).
  uint64_t framing_bytes() const { return framing_; }

 private:
  enum class Phase { kSize, kData, kDataEnd, kTrailer };
  void fail(State state, std::string message);
  void end_of_line();

  ChunkedLimits limits_;
  State state_ = State::kNeedMore;
  std::string error_;
  Phase phase_ = Phase::kSize;
  std::string line_;
  uint64_t remaining_ = 0;
  size_t total_ = 0;
  uint64_t framing_ = 0;
  size_t trailer_bytes_ = 0;
  size_t trailers_ = 0;
};

}  // namespace kvgate::http
