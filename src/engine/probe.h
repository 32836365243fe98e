// Server probe: learns what a llama-server binary is (fork, version) and which flags and
// value spellings it accepts, by running it: `BIN --version`, `BIN --help` and one
// `BIN ARGS --version` per entry of plan::flag_probes() (each exits in milliseconds without
// loading a model). The analysis is plan::analyze_probes; this file runs the processes and
// caches the raw record per binary.
//
// Cache: one file per binary under  cache_root()/probe/<hash of the canonical path>.txt  in
// plan's probe-record format, keyed by canonical path + mtime + size; a rebuilt binary (or a
// kvgate with new probes) is probed again. The record, not the analysis, is cached, so a
// newer kvgate re-analyses old records correctly.
//
// Thread-safety: probe_server may be called from several threads; two concurrent first
// probes of one binary both run and the last write of the cache file wins (it is written to
// a temporary file and renamed).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "plan/server_caps.h"
#include "util/result.h"

namespace kvgate::engine {

// Runs one probe of a binary. Behind an interface so tests can replay recorded outputs.
class ProbeRunner {
 public:
  virtual ~ProbeRunner() = default;
  // Runs `binary args...` to completion; keeps at most `max_lines` output lines.
  virtual Result<plan::ProbeOutcome> run(const std::filesystem::path& binary,
                                         const std::vector<std::string>& args, size_t max_lines) = 0;
};

// Runs the binary as a child (util::Subprocess: own process group, LLAMA_ARG_* removed,
// killed with kvgate). A run that takes longer than `timeout` is killed and is an error.
class SubprocessProbeRunner final : public ProbeRunner {
 public:
  explicit SubprocessProbeRunner(std::chrono::milliseconds timeout = std::chrono::seconds(30))
      : timeout_(timeout) {}
  Result<plan::ProbeOutcome> run(const std::filesystem::path& binary, const std::vector<std::string>& args,
                                 size_t max_lines) override;

 private:
  std::chrono::milliseconds timeout_;
};

// Runs every probe (no cache). The record's binary/mtime/size identify `binary`.
Result<plan::ProbeRecord> record_probes(const std::filesystem::path& binary, ProbeRunner& runner);

struct ProbeOptions {
  std::filesystem::path cache_dir;  // empty: cache_root()/probe
  bool use_cache = true;
  ProbeRunner* runner = nullptr;  // null: a SubprocessProbeRunner
};

struct ProbeResult {
  plan::ServerCaps caps;
  bool from_cache = false;
  std::filesystem::path cache_file;
};

// Probes `binary` (or reads its cached record) and analyses it.
Result<ProbeResult> probe_server(const std::filesystem::path& binary, const ProbeOptions& options = {});

}  // namespace kvgate::engine
