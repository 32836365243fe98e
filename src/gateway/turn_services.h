// TurnServices: what a chat turn (turn_steps.h) uses of the gateway that runs it, and nothing
// else: the components it shares with the gateway's other routes, by reference, and the
// gateway's operations it shares with them (TurnHost). The Gateway makes one for each turn;
// a Turn has no other way into the Gateway, so this header is the whole of what the two
// promise each other.
//
// Thread-safety: every component here is safe to use from several request threads at once
// (gateway.h); TurnHost's operations likewise, with the locking each names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/admission.h"
#include "gateway/api_error.h"
#include "gateway/engine_link.h"
#include "gateway/gateway_options.h"
#include "gateway/request_limits.h"
#include "kvstate/kv_keeper.h"
#include "metrics/metrics.h"
#include "session/session.h"
#include "upstream/tokens.h"
#include "util/result.h"

namespace kvgate::gateway {

// One compaction of a conversation (TurnHost::compact_conversation): what it aims at and how.
struct CompactionCall {
  uint64_t target = 0;
  uint64_t first_new = 0;             // history index of the first message of the current request
  const char* trigger = "watermark";  // "watermark", "overflow", "window", "manual" or "client"
  int slot = 0;
  bool summaries = true;          // false: drop the oldest turns (CompactionOptions::summaries)
  uint64_t fit = 0;               // CompactionOptions::fit_tokens
  std::string_view tools_text;    // the request's tools as sent (ChatRequest::tools_text)
  std::string_view instructions;  // the client's own summary instruction (context management)
};

// The gateway's operations a turn uses; the Gateway implements them for its routes too.
class TurnHost {
 public:
  virtual ~TurnHost() = default;

  // The bounds check_chat_limits() applies (the context only asked for when it is used).
  virtual RequestLimits request_limits() = 0;
  // A place with the engine for `key` (admission.h). On refusal the request record is filled
  // and the error is the one to answer (client_left(): nothing to answer).
  virtual ApiResult<Admission::Ticket> admit(const std::string& key, const ClientGone& client_gone,
                                             RequestRecord& rec) = 0;
  // chat_template_kwargs.preserve_thinking for a request with thinking off, where it helps
  // and the client did not set it.
  virtual void mark_template_kwargs(nlohmann::json& body) = 0;
  // The messages sent upstream for `view` in a request with `body` (its thinking decided).
  virtual nlohmann::json upstream_view(nlohmann::json view, const nlohmann::json& body) = 0;
  // Before content of `scope` goes to `slot` (slot_tenants.h): with several keys, clears the
  // slot when it may hold another key's content, unless `own_state` (the scope's own saved
  // state was restored into it, replacing what it held). False when the slot could not be
  // cleared: the request must then not reuse the slot's cache (cache_prompt false).
  virtual bool keep_slot_private(int slot, const std::string& scope, bool own_state) = 0;
  // Context size per slot (from options or the engine's /props), 0 if unknown.
  virtual uint64_t context_tokens() = 0;

  // One compaction of `conv` (a session's conversation, or a turn's copy of it; the caller
  // holds the session's turn), shared by chat turns and the manual route
  // (gateway_compaction.cc): counted with `body`'s tools and template arguments, summaries
  // asked from the engine in `call.slot`. The conversation is replaced by the compacted one;
  // the result is the compaction's event (as sessions list it), logged and counted. A
  // compaction that cannot reach the target is a context_length_exceeded error.
  virtual ApiResult<nlohmann::json> compact_conversation(session::Session& session,
                                                         session::Conversation& conv,
                                                         const nlohmann::json& body,
                                                         const CompactionCall& call) = 0;
  // A compaction's event ({"level", "trigger", …}) stamped with its time, logged with the
  // session's id and counted (compactions_total{level,trigger}); returned as sessions list it.
  virtual nlohmann::json record_compaction(const session::Session& session, nlohmann::json event) = 0;
  // Engine-written summary of history before `until`, asked as a continuation of the cached
  // prompt (`continuation`) or of `c`'s own view (one fitted to the context).
  virtual Result<std::string> engine_summary(session::Session& session, const nlohmann::json& request_body,
                                             const CompactionCall& call, const session::Conversation& c,
                                             uint64_t until, uint64_t max_tokens, bool continuation,
                                             nlohmann::json& stats) = 0;
  // Saves the session (state, keys, new compaction events; the caller holds its turn); after a
  // save that works, also the sessions whose saves failed before (the store was full, read-only
  // or locked).
  virtual Status persist(session::Session& session, const std::vector<nlohmann::json>& new_compactions) = 0;
};

struct TurnServices {
  const GatewayOptions& options;
  EngineLink& engine;  // the engine, its failures, the resend of a lost request
  session::SessionTable& sessions;
  session::SlotPool& slots;
  TokenCounter& tokens;
  Metrics& metrics;
  KvKeeper* kv = nullptr;  // saved engine state; null when off
  TurnHost& host;
};

}  // namespace kvgate::gateway
