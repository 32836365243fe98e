// GatewayOptions: what a Gateway (gateway.h) is configured with, set once before it is
// made. Its own header, so that the parts that read it (a chat turn, turn_services.h) need not
// see the Gateway.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/admission.h"
#include "gateway/response_store.h"
#include "kvstate/kv_keeper.h"
#include "plan/engine_quirks.h"
#include "session/compactor.h"
#include "session/stabiliser.h"
#include "session/thinking.h"
#include "upstream/tokens.h"

namespace kvgate::gateway {

struct GatewayOptions {
  // Keys clients authenticate with; none: no authentication. Each key is its own scope:
  // conversations made with one key cannot be reached, listed or continued with another.
  std::vector<std::string> api_keys;
  int slots = 1;  // engine slots (-np); sessions are pinned to them
  size_t max_sessions = 1024;
  // The session store's retention (SessionStore::prune): sessions unused for longer than
  // `session_retention_age`, then all but the `session_retention_count` most recently used,
  // are removed when the store is opened and every `session_prune_every` while saving; 0
  // turns a bound off (kvgate up --session-retention, --max-stored-sessions).
  std::chrono::seconds session_retention_age{std::chrono::hours(24 * 30)};
  int64_t session_retention_count = 20000;
  std::chrono::seconds session_prune_every{600};
  session::ThinkingOptions thinking;
  bool count_tokens = true;          // exact prompt accounting where compaction needs it
  bool always_count_tokens = false;  // count every request exactly, even far below the watermark
  // How the engine counts prompts (tokens.h): kRender with /apply-template; kChatTokenize
  // with vLLM's /tokenize of chat messages (naming `counting_model` when a request names no
  // model); kEstimate where it cannot: estimates from the request's size at a rate learned
  // from the engine's answers (token_estimate.h).
  Counting counting = Counting::kRender;
  std::string counting_model;
  std::chrono::milliseconds stream_head_grace{1500};
  std::chrono::milliseconds keepalive{10000};
  std::chrono::milliseconds wait_for_engine{30000};  // engine restarting: wait this long, then 503
  // While the supervisor brings a new engine up (EngineEndpoint::coming_back), the wait is
  // this long instead when longer: as long as the supervisor gives a start (kvgate up: its
  // --start-timeout + --ready-timeout), so a restart slower than wait_for_engine on a busy
  // machine does not fail the requests that wait for it.
  std::chrono::milliseconds wait_for_restart{0};
  double initial_prefill_ms_per_token = 20.0;  // until measured
  // The engine's silence kvgate waits through (before the first byte: at least this, more
  // for long prompts at the measured prefill speed; between stream events: this), then 504
  // or an in-stream error.
  std::chrono::seconds min_upstream_timeout{300};
  // Added for a non-streamed answer, which arrives only when the whole reply is generated.
  std::chrono::seconds generation_timeout{600};
  // The output limit (max_tokens) the engine is given for a chat turn whose client set none
  // (Codex sends none): a generation nobody capped ends as "length" instead of decoding until
  // the context is full. 0: none.
  uint64_t default_max_tokens = 16384;
  // Requests working with the engine and waiting (see admission.h); max_active 0 = `slots`.
  AdmissionOptions admission{.max_active = 0};
  std::string model_name = "kvgate";
  // The engine's fork: its quirks (plan/engine_quirks.h) that the gateway corrects.
  plan::Fork engine_fork = plan::Fork::kMainline;
  // The engine moves cached chunks into place after a deletion (mainline --cache-reuse on an
  // attention-only model): a client's window that dropped messages at the front then costs
  // its increment, and the gateway follows the window instead of dropping more of it.
  bool engine_shifts = false;
  // Bounds on one request's work (request_limits.h): messages per chat request, the longest
  // vocabulary entry in bytes (0: unknown; with the context it refuses a newest user message
  // that cannot fit), the time one token count may take (tokens.h). The compaction time
  // limit is compaction_options.time_limit.
  size_t max_messages = 4096;
  uint64_t max_token_bytes = 0;
  std::chrono::milliseconds count_time_limit{30000};

  // Context management (see compactor.h, stabiliser.h).
  bool compaction = true;
  std::optional<uint64_t> context_tokens;         // per-slot context; default: asked from the engine
  std::optional<uint64_t> high_watermark_tokens;  // default: high_watermark_fraction of the context
  double high_watermark_fraction = 0.8;
  double low_watermark_fraction = 0.55;  // of the high watermark
  uint64_t reply_reserve_tokens = 1024;  // room kept for the reply when max_tokens is not given
  session::CompactionOptions compaction_options{.time_limit = std::chrono::seconds(60)};
  bool model_summaries = true;  // L2 asks the engine; off: extractive only
  std::chrono::seconds summary_timeout{120};
  session::StabiliserOptions stabiliser;
  int max_overflow_retries = 2;
  // Conversations' engine state saved to disk and restored (kv_keeper.h); off unless set.
  KvOptions kv;
  // Told when the engine cannot be reached or fails a request with a 5xx it did not
  // explain (the supervisor then probes it at once). Called from request threads.
  std::function<void(const std::string& what)> on_engine_failure;
  // Told when the engine failed requests with unexplained 5xx answers several times in a row
  // (it answers, but does not work: the supervisor then probes with real completions).
  std::function<void(const std::string& what)> on_requests_failing;
  // The status page's engine and memory panels (kvgate up: the supervisor and the plan):
  // an object whose "engine" members join the status's "engine" and whose other members
  // (e.g. "memory") are added to the status. Called per status request; must not block.
  std::function<nlohmann::json()> engine_report;
  // The last `kvgate bench prefill` report (its prefill.json), shown on the status page.
  nlohmann::json bench_prefill;
  // Gateways of one fleet (fleet.h) share the stored Responses answers, so a continuation by
  // previous_response_id works on any engine; none: the gateway keeps its own.
  std::shared_ptr<ResponseStore> responses;
  // Each turn's engine request carries the conversation's id (its session id, stable across
  // turns) in this body field (e.g. "user"), and in the endpoint's conversation_header: a
  // router in front of several engines keeps the conversation where its KV is. Empty: none.
  std::string conversation_field;
  // Told, on the request's thread, the id of each Responses answer stored.
  std::function<void(const std::string& id)> on_response_stored;
};

}  // namespace kvgate::gateway
