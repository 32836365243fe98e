// The supervisor's startup verification backed by `kvgate doctor`'s comparison
// (engine/verify.h): each engine start gets a StartupVerifier built from the memory plan,
// fed the live log; at readiness its final comparison becomes the VerificationReport
// (errors are findings the --on-mismatch policy acts on, warnings are only reported).
#pragma once

#include "engine/live_verifier.h"
#include "plan/memory_model.h"
#include "plan/server_settings.h"

namespace kvgate::engine {

// Each call of the returned factory makes a fresh verifier expecting `plan` and `settings`.
VerifierFactory doctor_verifier_factory(const plan::MemoryPlan& plan, const plan::ServerSettings& settings);

}  // namespace kvgate::engine
