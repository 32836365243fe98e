// libFuzzer target: the startup-log parser (kvgate doctor, and the supervisor's live
// verification of every engine start) on arbitrary text. Nothing may crash; facts are the same
// whether the log arrives whole or line by line (the live path); the comparison with a plan
// and the allocation check run on whatever was recognised.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "engine/startup_log.h"
#include "engine/verify.h"

namespace {

using namespace kvgate::engine;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const StartupFacts whole = parse_startup_log(text);
  StartupLogParser live;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      if (i > start || i < text.size()) live.feed(text.substr(start, i - start));
      start = i + 1;
    }
  }
  const StartupFacts& f = live.facts();
  check(f.recognised <= f.lines);
  check(f.errors.size() <= 20);
  check(whole.kv_caches.size() == f.kv_caches.size());
  check(whole.n_ctx == f.n_ctx && whole.n_slots == f.n_slots && whole.errors.size() == f.errors.size());
  (void)require_allocation_facts(f);
  (void)f.has_allocation_facts();
  for (auto role : {kvgate::plan::CacheRole::kMain, kvgate::plan::CacheRole::kSwa}) (void)f.kv_cache(role);
  // The comparison with an expectation (as the supervisor runs it, live and final).
  Expectation e;
  e.fork = size % 2 ? kvgate::plan::Fork::kIk : kvgate::plan::Fork::kMainline;
  e.n_ctx = e.n_ctx_seq = e.n_ctx_slot = 4096;
  e.type_k = e.type_v = "f16";
  e.sizes_known = size % 3 != 0;
  (void)compare(e, f, false);
  (void)compare(e, f, true);
  return 0;
}
