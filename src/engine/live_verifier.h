// LiveVerifier: the supervisor's startup-verification hook. Each engine start gets a fresh
// verifier (from a VerifierFactory); it is fed the engine's output lines as they arrive and,
// once the engine answers /health and a 1-token completion (its startup log is then
// complete), asked for its verdict: what the log confirmed and what contradicts the plan.
// The supervisor applies the --on-mismatch policy to the findings.
//
// Thread-safety: implementations need none. The supervisor serialises every call to one
// verifier (on_line comes from the engine's output thread, finish from the owner thread,
// under one mutex) and calls nothing after finish().
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::engine {

// What the startup log says the engine allocated, in MiB summed over devices; nullopt: the
// log did not say (or nothing was checked).
struct ReportedMemory {
  std::optional<double> weights, kv, recurrent, compute, output;
};

struct VerificationReport {
  // A one-line name of what was checked (e.g. "plan vs startup log"); empty: nothing was.
  std::string checker;
  std::vector<std::string> verified;  // what the log confirmed, one item per line
  std::vector<std::string> findings;  // contradictions, each naming the fix
  std::vector<std::string> warnings;  // worth a look, never a reason to fail
  ReportedMemory reported;
  bool passed() const { return findings.empty(); }
};

class LiveVerifier {
 public:
  virtual ~LiveVerifier() = default;
  virtual void on_line(std::string_view line) = 0;
  virtual VerificationReport finish() = 0;
};

using VerifierFactory = std::function<std::unique_ptr<LiveVerifier>()>;

enum class OnMismatch { kFail, kWarn };

}  // namespace kvgate::engine
