// Turn: the steps of one chat turn (turn.h lists them) as methods over the turn's state.
// Gateway::run_turn makes one per request and runs it; nothing else uses this header.
//
// A step either completes or ends the turn with the ApiError the client gets; run() turns
// that error into the answer (TurnOutput::fail) and a request record. From bind() on, the
// turn holds the session's `turn` mutex and an admission ticket until it is destroyed.
//
// Thread-safety: one thread runs a Turn. It reads the Gateway's options and uses its
// thread-safe components and operations (turn_services.h), nothing else of the Gateway; the
// session's turn-guarded fields are its own while it holds the session's `turn` mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/admission.h"
#include "upstream/engine_counters.h"
#include "upstream/engine_errors.h"
#include "upstream/finish_reason.h"
#include "kvstate/kv_keeper.h"
#include "upstream/reply.h"
#include "gateway/rescued_reply.h"
#include "gateway/turn.h"
#include "gateway/turn_budget.h"
#include "gateway/turn_request.h"
#include "gateway/turn_services.h"
#include "session/intake.h"

namespace kvgate::http {
struct SseEvent;
}

namespace kvgate::gateway {

// One attempt at sending the view upstream, and what came of it.
struct SendOutcome {
  ReplyAccumulator reply;
  int status = 0;
  // The attempt failed. Answered to the client unless a retry follows (an overflow is
  // compacted and sent again, a failed engine retried once it is back, …).
  std::optional<ApiError> failure;
  bool saw_error_event = false;   // the engine reported an error inside its stream
  bool saw_done = false;          // the stream ended as the engine ends a complete answer
  bool overflow = false;          // the engine refused: prompt larger than its context
  bool context_filled = false;    // the reply filled the context (ik: an error, not "length")
  uint64_t overflow_prompt_tokens = 0;
  uint64_t overflow_context = 0;
  double ttft_ms = -1;
  bool rescued = false;           // the answer came from Turn::rescue()
  bool template_error = false;    // the engine's chat template refused the history
  std::optional<nlohmann::json> final_response;  // a whole answer, sent after the session is saved
  std::string final_text;                        // the engine's own text of it when unchanged
  std::optional<UpstreamFailure> upstream_failure;  // the engine failed before answering
  bool relayed = false;           // some of the engine's answer reached the client
};

// The outcome's flags from an engine's error answer (upstream/engine_errors.h), and what it means.
EngineErrorInfo note_engine_error(SendOutcome& out, int status, std::string_view error);

class Turn {
 public:
  Turn(const TurnServices& services, TurnInput input, TurnOutput& output);
  // Ends a stream the turn opened and did not end (a step threw): the adapter's keep-alive
  // thread uses the turn's CancelScope.
  ~Turn();
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

  // Every step; when it returns the client has its answer (or its error).
  void run();

 private:
  using Clock = std::chrono::steady_clock;

  // 1. turn.cc: the request checked, repaired, validated and stabilised.
  ApiStatus prepare();
  // 2. turn.cc: the conversation recognised, a place with the engine taken, the session's
  //    turn held.
  ApiStatus recognise();
  // 3. turn.cc: the request brought into the session's conversation (take_in).
  void reconcile();
  // 4. turn.cc: slot, seed and stream options in the body; the engine available.
  ApiStatus bind();
  // 5. turn.cc: the view; the slot made to hold this conversation's saved state when it
  //    matches, and only this key's content.
  void restore();
  // 6. turn_budget.cc: the view's token count or bound, compaction past the watermark.
  ApiStatus budget();
  ApiStatus compact_to(uint64_t target, const char* trigger);
  void recount();  // the view counted again (after a compaction, or when it was only bounded)
  uint64_t prompt_estimate() const;  // the exact count, else the bound, else 0
  // turn_context.cc: the client's context management (TurnInput::edits), after the count.
  ApiStatus manage_context();
  void clear_tool_uses(const wire::ClearToolUses& spec);
  ApiStatus compact_for_client(const wire::CompactEdit& edit);
  void answer_compaction();  // a paused compaction's answer: the summary alone
  // 7. turn_send.cc: attempts until one is final.
  ApiStatus send();
  bool retry_on_restarted_engine();
  bool retry_with_reply_cap();
  bool retry_with_strict_template();
  bool cap_reply(uint64_t prompt);
  ApiStatus outcome() const;  // the last attempt's failure, in the client's terms
  SendOutcome attempt();
  SendOutcome attempt_whole();
  void read_whole(UpstreamResponse& answer, SendOutcome& out, std::optional<std::string>& rescue_reason);
  void rescue_whole(SendOutcome& out, const std::string& reason);
  // turn_stream.cc
  struct StreamState;
  SendOutcome attempt_stream();
  bool read_events(StreamState& s, std::string_view data);
  bool take_event(StreamState& s, http::SseEvent& event);
  bool emit(const RelayChunk& chunk);  // false: the client is gone
  void end_stream_attempt(StreamState& s, const UpstreamResult<int>& result);
  void rescue_stream(StreamState& s);
  // turn_rescue.cc: the rejected generation replayed as a raw completion, parsed leniently.
  // `refused`: what the refused attempt gave (a stream: the content the client already has,
  // kept when nothing can be replayed, and the prefill progress).
  Result<Rescue> rescue(const std::string& reason, const ReplyAccumulator& refused);
  // The engine's counters (GET /metrics), read before each attempt so that the work of one
  // the engine refuses is known; nullopt when the engine does not export them.
  // `after_attempt`: once the turn's slot is idle (its last tokens are counted at release).
  std::optional<EngineCounters> read_engine_counters(bool after_attempt);
  RefusedAttempt refused_attempt(const ReplyAccumulator& refused, const std::optional<EngineCounters>& growth,
                                 uint64_t replayed_prompt) const;
  // 8. turn_commit.cc
  void commit(const ApiStatus& result);
  void account(const ApiStatus& result);
  void note_break();
  void record_turn();
  void keep_reply();  // the session takes this turn's conversation, view and reply
  void count_in_session(bool ok);
  void finish_answer(bool ok);
  void log_request(const ApiStatus& result) const;

  // Ends a turn refused before it took its place: the record, and the answer unless the
  // client has gone (client_left()).
  void refuse(const ApiError& error, const char* kind);
  std::string model_name() const;

  const TurnServices s_;  // all it uses of the gateway
  const GatewayOptions& options_;
  TurnInput in_;
  TurnOutput& out_;
  const Clock::time_point t0_ = Clock::now();
  RequestRecord rec_;

  // 1.
  ChatRequest req_;  // its body is sent upstream; its messages are replaced by the view
  std::vector<rescue::HistoryRepair> repairs_;
  Stabilised stable_;
  size_t request_messages_ = 0;
  // 2.
  session::RequestKeys keys_;
  session::SessionTable::Match match_;
  std::shared_ptr<session::Session> session_;
  Admission::Ticket ticket_;
  std::unique_lock<std::mutex> turn_lock_;
  // 3.
  session::Intake intake_;  // its conversation moved to conv_
  session::Conversation conv_;
  std::optional<session::BreakCause> cause_;
  std::string cause_detail_;
  // 4.
  int slot_ = 0;
  std::optional<ConversationTag> tag_;  // from bind(): the engine requests carry the session's id
  bool reassigned_ = false;
  // 5. (view_, generation_, kv_) and 6.
  nlohmann::json view_;
  uint64_t generation_ = 0;
  KvKeeper::Prepared kv_;
  uint64_t context_ = 0;
  Watermarks marks_;
  uint64_t reserve_ = 0;
  std::optional<uint64_t> bound_;
  uint64_t counted_ = 0;
  std::string rendered_;
  std::vector<nlohmann::json> compactions_;
  ContextReport managed_;  // what manage_context() did
  // 7.
  CancelScope cancel_;
  bool stream_opened_ = false;
  bool stream_ended_ = false;
  std::string upstream_text_;  // the body of the current attempt
  SendOutcome sent_;
  std::optional<EngineCounters> counters_before_;  // before the current attempt
  bool counters_missing_ = false;                  // the engine exported none: not asked again
  int overflow_retries_ = 0;
  std::optional<EngineResend> resend_;  // from send()
  uint64_t digest_ = 0;                // of the body as the client sent it (FatalRequests)
  FatalRequests::InFlight in_flight_;  // held while send() works with the engine
  bool template_retried_ = false;
  bool filled_retried_ = false;
  // 8.
  size_t view_messages_ = 0;
  size_t diverged_at_ = 0;
  int64_t accounting_diff_ = 0;
};

}  // namespace kvgate::gateway
