// ServerCaps: what one llama-server build (mainline llama.cpp or ik_llama.cpp) accepts,
// learned by running it, never by trusting its version number or its --help.
//
// Both engines parse arguments left to right and exit 0 as soon as they reach --version,
// so `BIN ARGS --version` exiting 0 means ARGS (flag and value) are accepted; a non-zero
// exit means the flag is unknown ("unknown argument" on ik, "invalid argument" on
// mainline) or the value is not ("invalid parameter for argument" on ik, "error while
// handling argument" on mainline). engine/probe.h runs these probes; this file holds the
// probe list, the record of their raw outputs (the probe cache and the test fixtures use
// the same text format) and the pure analysis that turns a record into capabilities.
//
// ik_llama.cpp's --help is hand-maintained and incomplete (it omits --alias, -ngl's long
// forms, ...), so help_flags is informational; decisions use probes only. ik validates
// -ctk/-ctv values at model load, not at parse time: a build that accepts an invalid cache
// type at parse time gets the documented type list of its fork instead of probe results.
//
// Record format (text, one item per line):
//   kvgate-probe-record 1
//   binary PATH            (optional header fields: binary, mtime_ns, size)
//   run ARGS               the arguments after the binary, space-separated
//   exit N                 exit code (-S when killed by signal S)
//   lines K                then K lines of combined stdout+stderr
// repeated for every run.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plan/server_settings.h"
#include "util/result.h"

namespace kvgate::plan {

// The flag probes kvgate runs, each as `ARGS` (the probe run is `BIN ARGS --version`).
std::span<const std::string_view> flag_probes();

// Cache types each fork documents (ik: common/common.cpp; mainline: common/arg.cpp).
std::span<const std::string_view> documented_kv_types(Fork fork);

struct ProbeOutcome {
  int exit_code = 0;  // negative: killed by that signal
  std::vector<std::string> lines;
};

struct ProbeRecord {
  std::string binary;
  int64_t mtime_ns = 0;
  uint64_t size = 0;
  std::map<std::string, ProbeOutcome> runs;  // key: arguments after the binary, e.g. "-fa on --version"
};

std::string format_probe_record(const ProbeRecord& record);
// Errors name the line number and what was expected.
Result<ProbeRecord> parse_probe_record(std::string_view text);

struct ServerCaps {
  std::string binary;
  Fork fork = Fork::kMainline;
  std::string version;             // "0.4.0-dev"; empty when the build prints only a build number
  uint64_t build = 0;              // git rev-list --count of the build (0/1 without git)
  std::string commit;              // "80fb11a" or "unknown"
  std::string built_with;          // "GNU 12.2.0 for Linux x86_64"
  std::set<std::string> accepted;  // flag probes that exited 0
  std::map<std::string, std::string> rejected;  // flag probe -> the build's error line
  std::set<std::string> help_flags;             // option names listed by --help
  std::vector<std::string> kv_types;            // accepted -ctk/-ctv values
  // False when the build says it has no usable GPU while parsing -ngl (mainline: "no usable
  // GPU found"; ik: "not compiled with GPU offload support"): -ngl then changes nothing and
  // every layer stays on the host, which runs the CPU backend's kernels only.
  bool gpu_offload = true;

  // True if the flag probe `probe` (one of flag_probes()) exited 0.
  bool accepts(std::string_view probe) const;
  bool accepts_kv_type(std::string_view type) const;
  // "mainline llama.cpp 0.4.0-dev (build 1, commit 80fb11a) at /path/llama-server"
  std::string describe() const;
  // Why `probe` was rejected (the build's own error line), or "not probed".
  std::string rejection(std::string_view probe) const;
};

// Analyses a complete record (--version, --help and every flag probe). Error if --version
// failed (not a llama-server), a flag probe is missing from the record, or the fork cannot
// be told.
Result<ServerCaps> analyze_probes(const ProbeRecord& record);

// Parses `--version` output: "version: 0.4.0-dev (build 1, commit 80fb11a)" (mainline since
// 0.2) or "version: 4840 (8337e4cd)" (ik, older mainline), plus "built with X for Y".
// REQUIRES nothing; fields stay empty/0 when absent.
void parse_version(const std::vector<std::string>& lines, ServerCaps& caps);

// Option names listed in --help output of either fork's format.
std::set<std::string> parse_help_flags(const std::vector<std::string>& lines);

}  // namespace kvgate::plan
