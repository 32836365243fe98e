// Reading one line of an engine's log: a cursor whose every read checks what is left and
// fails without consuming, and the small shapes llama-server's startup lines share (mainline's
// time/level prefix, "tag: body", "N cells, N layers, N seqs", "X (type): N MiB", ik's
// key=value fields). Used by the startup-log parser (startup_log.h).
//
// Pure functions; a Scan is thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kvgate::engine {

class Scan {
 public:
  explicit Scan(std::string_view s) : s_(s) {}

  void ws();  // skips spaces and tabs
  // Each of these skips spaces first; on failure nothing is consumed.
  bool lit(std::string_view x);
  std::optional<uint32_t> u32();
  std::optional<int32_t> i32();
  std::optional<double> num();  // 0 to 1e15
  // Text up to `stop` (not included); consumes the stop character.
  std::optional<std::string_view> until(char stop);
  // Up to a space, a tab or a comma (may be empty).
  std::string_view word();
  std::string_view rest() const { return s_; }

 private:
  std::string_view s_;
};

std::string_view trim(std::string_view s);
// Removes ANSI colour sequences (logs captured from a terminal).
std::string strip_colours(std::string_view line);
// Mainline's `M.SS.mmm.uuu L ` prefix: returns the level letter and strips it (0 when absent).
char strip_prefix(std::string_view& line);
// "tag: body" with an identifier tag; empty tag when the line has no such prefix.
std::pair<std::string_view, std::string_view> split_tag(std::string_view line);
// "true"/"1"/"enabled"/"on" and their opposites.
std::optional<bool> parse_bool_word(std::string_view w);

// "N cells, N layers, S[/T] seqs" shared by the KV and recurrent-state size lines.
struct Shape {
  uint32_t cells = 0;
  uint32_t layers = 0;
  uint32_t seqs = 0;
  std::optional<uint32_t> streams;
};
std::optional<Shape> parse_shape(Scan& s);
// "X (type): N MiB" with X = `label`.
bool parse_typed(Scan& s, std::string_view label, std::string& type, double& mib);
// The value of `key=` in an ik server line ("INFO [ init] new slot | tid=… n_ctx_slot=4096").
std::optional<uint32_t> ik_field(std::string_view line, std::string_view key);

}  // namespace kvgate::engine
