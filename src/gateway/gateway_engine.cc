// The Gateway's dealings with the engine around a request that are not EngineLink's
// (engine_link.h): a place with the engine (admission.h), and what a new engine means.
#include <fmt/format.h>

#include "gateway/gateway.h"

namespace kvgate::gateway {

ApiResult<Admission::Ticket> Gateway::admit(const std::string& key, const ClientGone& client_gone,
                                            RequestRecord& rec) {
  auto r = admission_.enter(key, client_gone);
  if (r.ok()) return std::move(r).value();
  const Admission::Refusal& refusal = r.error();
  metrics_.add(fmt::format("admission_refused_total{{reason=\"{}\"}}", refusal.code()));
  ApiError e = too_many_requests(refusal.message, refusal.retry_after_s);
  e.code = refusal.code();
  if (refusal.reason == Admission::Refusal::Reason::kClientGone) e.status = kClientClosedStatus;
  rec.status = e.status;
  rec.error_kind = refusal.code();
  return e;
}

void Gateway::on_engine_restart(bool hung) { engine_.on_restart(hung); }

}  // namespace kvgate::gateway
