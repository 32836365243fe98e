#include "engine/live_doctor.h"

#include <fmt/format.h>

#include "engine/verify.h"

namespace kvgate::engine {
namespace {

std::optional<double> sum_mib(const std::vector<BufferFact>& buffers) {
  if (buffers.empty()) return std::nullopt;
  double mib = 0;
  for (const auto& b : buffers) mib += b.mib;
  return mib;
}

ReportedMemory reported_memory(const StartupFacts& f) {
  ReportedMemory r{.weights = sum_mib(f.model_buffers),
                   .kv = sum_mib(f.kv_buffers),
                   .recurrent = sum_mib(f.rs_buffers),
                   .compute = sum_mib(f.compute_buffers),
                   .output = sum_mib(f.output_buffers)};
  if (!r.kv && !f.kv_caches.empty()) {
    double mib = 0;
    for (const auto& c : f.kv_caches) mib += c.mib;
    r.kv = mib;
  }
  if (!r.kv && f.kv_self) r.kv = f.kv_self->mib + f.kv_self_indexer_mib.value_or(0);
  if (!r.recurrent && f.recurrent) r.recurrent = f.recurrent->mib;
  return r;
}

class DoctorLiveVerifier final : public LiveVerifier {
 public:
  explicit DoctorLiveVerifier(Expectation expected) : verifier_(std::move(expected)) {}

  void on_line(std::string_view line) override { verifier_.feed(line); }

  VerificationReport finish() override {
    const Comparison c = verifier_.finish();
    VerificationReport r;
    r.checker = "plan vs startup log";
    r.verified = c.verified;
    r.reported = reported_memory(verifier_.facts());
    for (const auto& f : c.findings) {
      const std::string text = fmt::format("[{}] {}", f.code, f.message);
      if (f.severity == Severity::kError) {
        r.findings.push_back(text);
      } else if (f.severity == Severity::kWarning) {
        r.warnings.push_back(text);
      }
    }
    return r;
  }

 private:
  StartupVerifier verifier_;
};

}  // namespace

VerifierFactory doctor_verifier_factory(const plan::MemoryPlan& plan, const plan::ServerSettings& settings) {
  const Expectation expected = expectation_from_plan(plan, settings);
  return [expected] { return std::make_unique<DoctorLiveVerifier>(expected); };
}

}  // namespace kvgate::engine
