#include "http/http_message.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "util/strings.h"

namespace kvgate::http {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

HeadParse fail(int status, std::string message) {
  HeadParse p;
  p.state = HeadParse::State::kError;
  p.error = {status, std::move(message)};
  return p;
}

}  // namespace

std::optional<std::string_view> HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers) {
    if (k == lower_name) return std::string_view(v);
  }
  return std::nullopt;
}

std::optional<std::string> HttpRequest::query_param(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    const size_t amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    const size_t eq = part.find('=');
    if (part.substr(0, eq) == name) {
      std::string v(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1));
      std::replace(v.begin(), v.end(), '+', ' ');
      return percent_decode(v);
    }
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

bool HttpRequest::keep_alive() const {
  const auto conn = header("connection");
  const std::string c = conn ? util::ascii_lower(*conn) : "";
  if (version_minor == 0) return c.find("keep-alive") != std::string::npos;
  return c.find("close") == std::string::npos;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = util::hex_digit_value(s[i + 1]);
      const int lo = util::hex_digit_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

HeadParse parse_request_head(std::string_view data, const HeadLimits& limits) {
  // The method is a token: anything else before the first space is not HTTP (a TLS
  // ClientHello starts with 0x16), answered without waiting for the rest.
  for (char c : data.substr(0, data.find(' '))) {
    if (!is_token_char(c)) return fail(400, "not an HTTP/1.1 request (is the client speaking TLS? use http://)");
  }
  const size_t end = data.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    // Be lenient with bare LF line ends only in the sense of detecting an oversized head.
    if (data.size() > limits.max_head_bytes) return fail(431, "request headers exceed " + std::to_string(limits.max_head_bytes) + " bytes");
    return {};
  }
  if (end + 4 > limits.max_head_bytes) {
    return fail(431, "request headers exceed " + std::to_string(limits.max_head_bytes) + " bytes");
  }
  HeadParse p;
  p.head.head_bytes = end + 4;
  std::string_view head = data.substr(0, end);
  const size_t line_end = head.find("\r\n");
  std::string_view line = head.substr(0, line_end);
  std::string_view rest = line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);

  // Request line: METHOD SP TARGET SP HTTP/1.x
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(400, "malformed request line");
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), is_token_char)) return fail(400, "malformed method");
  if (target.size() > limits.max_target_bytes) return fail(414, "request target too long");
  if (target.empty() || target.front() != '/') return fail(400, "request target must start with '/'");
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return fail(400, "invalid character in request target");
  }
  if (version == "HTTP/1.1") {
    p.head.request.version_minor = 1;
  } else if (version == "HTTP/1.0") {
    p.head.request.version_minor = 0;
  } else if (version.substr(0, 5) == "HTTP/") {
    return fail(505, "HTTP version not supported (use HTTP/1.1)");
  } else {
    return fail(400, "malformed HTTP version");
  }
  HttpRequest& r = p.head.request;
  r.method = std::string(method);
  r.target = std::string(target);
  const size_t q = target.find('?');
  r.path = percent_decode(target.substr(0, q));
  if (q != std::string_view::npos) r.query = std::string(target.substr(q + 1));

  std::optional<uint64_t> content_length;
  bool chunked = false;
  while (!rest.empty()) {
    const size_t nl = rest.find("\r\n");
    std::string_view h = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 2);
    if (h.empty()) continue;
    if (h.front() == ' ' || h.front() == '\t') return fail(400, "obsolete header line folding is not supported");
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) return fail(400, "malformed header line");
    std::string_view name = h.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_token_char)) return fail(400, "malformed header name");
    if (r.headers.size() >= limits.max_headers) return fail(431, "too many request headers");
    std::string lname = util::ascii_lower(name);
    std::string_view value = trim(h.substr(colon + 1));
    for (char c : value) {
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return fail(400, "invalid character in header value");
    }
    if (lname == "content-length") {
      uint64_t n = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || ptr != value.data() + value.size() || value.empty()) return fail(400, "invalid Content-Length");
      if (content_length && *content_length != n) return fail(400, "conflicting Content-Length headers");
      content_length = n;
    } else if (lname == "transfer-encoding") {
      if (util::ascii_lower(value) != "chunked") {
        return fail(501, "unsupported Transfer-Encoding (only chunked)");
      }
      chunked = true;
    } else if (lname == "host") {
      if (r.header("host")) return fail(400, "more than one Host header");
    } else if (lname == "expect") {
      if (util::ascii_lower(value) != "100-continue") return fail(417, "unsupported Expect header");
      p.head.expect_continue = true;
    }
    r.headers.emplace_back(std::move(lname), std::string(value));
  }
  if (chunked && content_length) return fail(400, "both Content-Length and Transfer-Encoding given");
  if (r.version_minor == 1 && !r.header("host")) return fail(400, "missing Host header");
  if (chunked) {
    p.head.body_kind = BodyKind::kChunked;
  } else if (content_length && *content_length > 0) {
    p.head.body_kind = BodyKind::kLength;
    p.head.content_length = *content_length;
  }
  p.state = HeadParse::State::kDone;
  return p;
}

void ChunkedDecoder::fail(State state, std::string message) {
  state_ = state;
  error_ = std::move(message);
}

size_t ChunkedDecoder::feed(std::string_view in, std::string& out) {
  size_t used = 0;
  while (used < in.size() && state_ == State::kNeedMore) {
    if (phase_ == Phase::kData) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, in.size() - used));
      out.append(in.substr(used, n));
      used += n;
      remaining_ -= n;
      if (remaining_ == 0) phase_ = Phase::kDataEnd;
      continue;
    }
    const char c = in[used++];
    ++framing_;
    if (phase_ == Phase::kTrailer && ++trailer_bytes_ > limits_.max_trailer_bytes) {
      fail(State::kTrailersTooLarge, "chunked body trailers exceed " + std::to_string(limits_.max_trailer_bytes) + " bytes");
      break;
    }
    if (c != '\n') {
      if (phase_ != Phase::kTrailer && line_.size() >= limits_.max_size_line + (c == '\r' ? 1 : 0)) {
        fail(State::kError, "chunk size line (with extensions) exceeds " + std::to_string(limits_.max_size_line) + " bytes");
        break;
      }
      if (phase_ != Phase::kTrailer || line_.size() < 2) line_ += c;  // a trailer is counted, not kept
      continue;
    }
    end_of_line();
    line_.clear();
  }
  return used;
}

void ChunkedDecoder::end_of_line() {
  std::string_view line = line_;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (phase_ == Phase::kDataEnd) {
    if (!line.empty()) fail(State::kError, "chunk data not followed by CRLF");
    phase_ = Phase::kSize;
  } else if (phase_ == Phase::kSize) {
    const size_t semi = line.find(';');
    std::string_view hex = trim(line.substr(0, semi));
    uint64_t size = 0;
    auto [ptr, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), size, 16);
    if (hex.empty() || ec != std::errc() || ptr != hex.data() + hex.size()) {
      fail(State::kError, "malformed chunk size");
    } else if (size > limits_.max_body || total_ + size > limits_.max_body) {
      fail(State::kTooLarge, "request body exceeds the limit of " + std::to_string(limits_.max_body) + " bytes");
    } else if (size == 0) {
      phase_ = Phase::kTrailer;
    } else {
      total_ += static_cast<size_t>(size);
      remaining_ = size;
      phase_ = Phase::kData;
    }
  } else if (line.empty()) {  // the blank line ending the trailer section
    state_ = State::kDone;
  } else if (++trailers_ > limits_.max_trailers) {
    fail(State::kTrailersTooLarge, "more than " + std::to_string(limits_.max_trailers) + " chunked body trailers");
  }
}

}  // namespace kvgate::http
