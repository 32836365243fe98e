#include "engine/live_doctor.h"

#include <fmt/format.h>

#include "engine/verify.h"

namespace kvgate::engine {
namespace {

class DoctorLiveVerifier final : public LiveVerifier {
 public:
  explicit DoctorLiveVerifier(Expectation expected) : verifier_(std::move(expected)) {}

  void on_line(std::string_view line) override { verifier_.feed(line); }

  VerificationReport finish() override {
    const Comparison c = verifier_.finish();
    VerificationReport r;
    r.checker = "plan vs startup log";
    r.verified = c.verified;
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
