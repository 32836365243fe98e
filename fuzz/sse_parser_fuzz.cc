// libFuzzer target: the SSE parser that relays an engine's stream. The first byte chooses how
// the rest is cut into pieces (as a network delivers it). Nothing may crash; the events must
// not depend on how the bytes were cut; the events' raw text must reproduce the input byte
// for byte up to what is still pending (kvgate relays `raw`).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "http/sse.h"

namespace {

using kvgate::http::SseEvent;
using kvgate::http::SseParser;

void check(bool ok) {
  if (!ok) std::abort();
}

std::vector<SseEvent> parse(std::string_view input, size_t piece, size_t max_line, bool& failed) {
  SseParser p(max_line);
  std::vector<SseEvent> out;
  for (size_t at = 0; at < input.size(); at += piece) {
    for (auto& ev : p.feed(input.substr(at, piece))) out.push_back(std::move(ev));
  }
  failed = p.failed();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 17;
  const size_t max_line = 64 + data[0] * 4u;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  bool failed_whole = false, failed_pieces = false;
  const auto whole = parse(input, input.size() + 1, max_line, failed_whole);
  const auto pieces = parse(input, piece, max_line, failed_pieces);
  check(failed_whole == failed_pieces);
  if (failed_whole) return 0;
  check(whole.size() == pieces.size());
  std::string relayed;
  for (size_t i = 0; i < whole.size(); ++i) {
    check(whole[i].raw == pieces[i].raw);
    check(whole[i].data == pieces[i].data);
    check(whole[i].event == pieces[i].event);
    check(whole[i].has_data == pieces[i].has_data);
    check(whole[i].comment_only == pieces[i].comment_only);
    check(!whole[i].raw.empty());
    relayed += whole[i].raw;
  }
  // Relaying raw reproduces the upstream: what was relayed is a prefix of the input.
  check(input.substr(0, relayed.size()) == relayed);
  return 0;
}
