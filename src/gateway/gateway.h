// Gateway: kvgate's OpenAI-compatible front. One instance serves every route; the HTTP
// edge (HttpServer) calls handle() for each request.
//
// Routes (one table in gateway.cc):
//   POST /v1/chat/completions   a chat turn (turn.h) through ChatCompletionsAdapter
//   POST /v1/messages           Anthropic Messages: a chat turn through MessagesAdapter
//   POST /v1/messages/count_tokens   the prompt's tokens, exact (engine template + tokenizer)
//   POST /v1/responses          OpenAI Responses: a chat turn through ResponsesAdapter;
//                               stored for previous_response_id (response_store.h)
//   POST /v1/responses/input_tokens  the prompt's tokens;  GET /v1/responses/{id}
//   POST /v1/completions        relayed (stream or not) with metrics
//   GET  /v1/models[/{id}]      the served model under its readable name (alias, or the file's
//                               stem), as OpenAI's and Anthropic's clients read it
//   HEAD /                      200 (clients probe the base URL)
//   GET  /health                gateway + engine state (public: no key needed)
//   GET  /metrics               Prometheus text
//   GET  /kvgate/v1/status      JSON: engine, sessions, slots, token accounting, counters
//   GET  /kvgate/v1/sessions[/ID]
//   /tokenize /detokenize /apply-template /props   passed through
//   GET  /slots                 passed through without any conversation's text (slot_listing.h)
// Everything but /health needs an API key when keys are configured (Authorization: Bearer
// or x-api-key; compared in constant time). Each key is a scope: sessions, their listing and
// the slot owners in /kvgate/v1/status are those of the caller's key only; with several keys
// no request reuses engine cache another key's requests left in a slot (slot_tenants.h), so
// neither its cached_tokens nor its speed says what another key sent. Errors are OpenAI-format JSON with
// proper statuses (Anthropic's format on /v1/messages routes); nothing a client sends reaches an exception
// outside handle()'s own catch.
//
// Capacity: chat turns, raw completions and manual compactions go through Admission
// (admission.h): at most `admission.max_active` work with the engine at once, one per session,
// sessions taking turns; beyond the waiting bounds or after the longest wait, a request gets
// 429 with Retry-After instead of piling up. An engine connection that fails before anything
// was relayed (refused, or closed by an engine that died) is retried once on the restarted
// engine, so a crash between requests or during a prefill costs the client only time.
//
// Thread-safety: handle() is called concurrently from connection threads; all shared state
// lives in thread-safe components (SessionTable, SlotPool, TokenCounter, Metrics, Admission)
// or atomics.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/admission.h"
#include "gateway/api_error.h"
#include "gateway/engine_link.h"
#include "gateway/gateway_options.h"
#include "gateway/path_error.h"
#include "gateway/request_limits.h"
#include "gateway/response_store.h"
#include "gateway/stream_relay.h"
#include "gateway/turn.h"
#include "gateway/turn_services.h"
#include "http/http_server.h"
#include "kvstate/kv_keeper.h"
#include "kvstate/slot_tenants.h"
#include "metrics/metrics.h"
#include "session/session.h"
#include "session/session_store.h"
#include "upstream/tokens.h"
#include "upstream/upstream.h"
#include "wire/responses_request.h"

namespace kvgate::gateway {

using http::HeadVerdict;
using http::HttpRequest;
using http::ResponseWriter;
using session::Conversation;
using session::Session;
using session::SessionTable;

class Gateway : private TurnHost {
 public:
  Gateway(GatewayOptions options, std::shared_ptr<Upstream> upstream);
  ~Gateway() override;

  // Makes sessions durable in the SQLite file at `path` (created if missing). Sessions of
  // earlier runs are found again by their conversations. Call before serving.
  // The retention of options().session_retention_* is applied at once.
  Status open_store(const std::filesystem::path& path);
  // Starts saving and restoring conversations' engine state (options().kv must be enabled).
  Status open_kv_states();
  // Saves every slot's state not yet saved (before the engine is stopped).
  void save_kv_states();

  void handle(const HttpRequest& request, ResponseWriter& writer);
  // One chat turn (turn.h), for a wire API's adapter: the answer, or the error, has reached
  // `output` when it returns.
  void run_turn(TurnInput input, TurnOutput& output);
  // HttpServer's head check (HttpServerOptions::head_check): the same route table and key
  // check as handle(), from the head alone, so 401/404/405 (and the 400 of an id in the head,
  // the 415 of a body that is not JSON: request_checks.h) are answered before any body is
  // read; `authenticated` says whether the request carried a valid key.
  HeadVerdict check_head(const HttpRequest& head) const;

  SessionTable& sessions() { return sessions_; }
  Metrics& metrics() { return metrics_; }
  Admission& admission() { return admission_; }
  TokenCounter& tokens() { return tokens_; }
  const GatewayOptions& options() const { return options_; }
  // The bounds this gateway puts on a chat request (request_limits.h; the engine's context
  // included when the options bound a token's bytes). Also the turn's (TurnHost).
  RequestLimits request_limits() override;
  // Called by the supervisor when the engine restarted (its cache is empty again); the
  // requests that were with the lost engine get their strikes (fatal_requests.h). `hung`:
  // the old engine was killed for not answering its probes (not a crash or an outside kill).
  void on_engine_restart(bool hung = false);
  // How the engine's template renders a past reply as it was generated, with thinking off
  // (template_probe.cc; asked once per engine generation). A Qwen3-style template ends the
  // generation prompt in an empty think block that it renders for a past reply only when the
  // reply has reasoning (`reasoning`: every assistant message is sent with an empty one,
  // "\n"), and only after the last user message unless asked to keep it (`preserve`:
  // chat_template_kwargs.preserve_thinking, which Qwen3.5/3.6 templates read and kvgate up
  // writes into older ones, plan/chat_template.h). Then a turn after a tool call or a new
  // user message extends the previous prompt instead of recomputing the reply.
  struct TemplateMarks {
    bool reasoning = false;
    bool preserve = false;
    bool user_turn_exact = false;  // with these, the next user turn too (else the tool loop only)
  };
  TemplateMarks template_marks();

 private:
  using Route = void (Gateway::*)(const HttpRequest&, ResponseWriter&);
  struct RouteTable;  // gateway.cc: the one route table
  struct Routed {
    Route route;
  };
  // The route serving `request`, or the refusal it gets from its head (401, 404, 405).
  Result<Routed, ApiError> route_for(const HttpRequest& request) const;
  void chat(const HttpRequest& request, ResponseWriter& writer);
  // wire_routes.cc: Anthropic Messages, OpenAI Responses, their token counts, the models.
  void messages(const HttpRequest& request, ResponseWriter& writer);
  void count_message_tokens(const HttpRequest& request, ResponseWriter& writer);
  void responses(const HttpRequest& request, ResponseWriter& writer);
  void response_input_tokens(const HttpRequest& request, ResponseWriter& writer);
  // POST /v1/responses/compact: the conversation summarised by the engine, as one compaction
  // item (a turn that asks for a compaction and pauses after it; turn_context.cc).
  void compact_responses(const HttpRequest& request, ResponseWriter& writer);
  void get_response(const HttpRequest& request, ResponseWriter& writer);
  void models(const HttpRequest& request, ResponseWriter& writer);
  void head_ok(const HttpRequest& request, ResponseWriter& writer);
  // A Responses request converted, with the stored conversation of its previous_response_id.
  ApiResult<wire::ResponsesConversion> responses_request(const HttpRequest& request,
                                                         const std::string& scope);
  ApiResult<nlohmann::json> previous_messages(const wire::ClientJson& body, const std::string& scope);
  // The prompt tokens of a chat body as a turn would send it uncompacted (prepared and
  // stabilised), counted with the engine's template and tokenizer.
  // The prompt tokens of a converted chat body as a turn would send it (`tools_text`: its tools
  // as the client wrote them, TurnInput::tools_text).
  ApiResult<uint64_t> count_prompt(nlohmann::json body, std::string_view tools_text, ResponseWriter& writer);
  RelayOptions relay_options() const;
  // A turn refused before it began (its body is not JSON): the record and the error.
  void refuse_turn(const std::string& api, const ApiError& error, TurnOutput& output);
  // POST /v1/completions (completions_route.cc): checked, admitted, then sent whole or
  // streamed; once more to a restarted engine that lost it before answering.
  struct RawCompletion {
    uint64_t digest = 0;  // FatalRequests::digest of the client's body
    RequestRecord rec;
    std::string model;  // the id answers carry
    std::function<bool()> client_gone;
    nlohmann::json sent;                 // the body sent to the engine
    std::optional<EngineResend> resend;  // as a chat turn's (turn_send.cc)
  };
  void completions(const HttpRequest& request, ResponseWriter& writer);
  void completion_whole(RawCompletion& c, ResponseWriter& writer);
  void completion_stream(RawCompletion& c, ResponseWriter& writer);
  // After a failed attempt, nothing of it relayed: whether to send it again.
  static bool send_again(RawCompletion& c, const UpstreamError& error, const CancelScope& cancel);
  // A raw completion whose output the engine's parser refused (completion_rescue.cc): the
  // answer replayed and marked raw; nullopt when it cannot be (several prompts or choices, the
  // replay failed otherwise) and the engine's error stands.
  std::optional<nlohmann::json> rescue_completion(const nlohmann::json& body, const std::string& model,
                                                  const std::string& reason, CancelScope& cancel);
  // For an event of a raw completion stream: when it is that refusal, the events that end the
  // stream cleanly instead (a last chunk marked raw and naming `model`, then [DONE]).
  std::optional<std::string> raw_completion_stream_end(const nlohmann::json& event, std::string_view data,
                                                       const std::string& model);
  void passthrough(const HttpRequest& request, ResponseWriter& writer);
  void health(const HttpRequest& request, ResponseWriter& writer);
  void prometheus(const HttpRequest& request, ResponseWriter& writer);
  void status(const HttpRequest& request, ResponseWriter& writer);
  void list_sessions(const HttpRequest& request, ResponseWriter& writer);
  nlohmann::json session_json(Session& s);  // its to_json() and its saved engine state
  void compact_session(const HttpRequest& request, ResponseWriter& writer);
  void session_turns(Session& s, const std::string& rest, ResponseWriter& writer);  // .../ID/turns[/N]
  void status_page(const HttpRequest& request, ResponseWriter& writer);
  void status_asset(const HttpRequest& request, ResponseWriter& writer);

  // What a chat turn is given of this gateway (run_turn): its components and itself as the
  // TurnHost.
  TurnServices turn_services();
  // TurnHost (turn_services.h): what a chat turn and the other routes share; the contracts
  // are there.
  ApiResult<nlohmann::json> compact_conversation(Session& session, Conversation& conv,
                                                 const nlohmann::json& body,
                                                 const CompactionCall& call) override;
  nlohmann::json record_compaction(const Session& session, nlohmann::json event) override;
  uint64_t context_tokens() override;
  nlohmann::json upstream_view(nlohmann::json view, const nlohmann::json& body) override;
  void mark_template_kwargs(nlohmann::json& body) override;
  Result<std::string> engine_summary(Session& session, const nlohmann::json& request_body,
                                     const CompactionCall& call, const Conversation& c, uint64_t until,
                                     uint64_t max_tokens, bool continuation, nlohmann::json& stats) override;
  Status persist(Session& session, const std::vector<nlohmann::json>& new_compactions) override;
  ApiResult<Admission::Ticket> admit(const std::string& key, const ClientGone& client_gone,
                                     RequestRecord& rec) override;
  bool keep_slot_private(int slot, const std::string& scope, bool own_state) override;

  // One save; logs and counts a failure and remembers the session as unsaved.
  Status save_session(Session& session, const std::vector<nlohmann::json>& new_compactions);
  void save_unsaved_sessions(const std::string& just_saved);
  std::shared_ptr<Session> load_session(const std::string& id);
  // The scope of the key the request presents (scope_of_key), "open" when no keys are
  // configured; nullopt when keys are configured and the request presents none of them.
  std::optional<std::string> caller_scope(const HttpRequest& request) const;
  bool authorised(const HttpRequest& request) const { return caller_scope(request).has_value(); }
  void send_error(ResponseWriter& writer, const ApiError& error);
  void send_json(ResponseWriter& writer, int status, const nlohmann::json& body);

  GatewayOptions options_;
  std::shared_ptr<Upstream> upstream_;
  SessionTable sessions_;
  session::SlotPool slots_;
  SlotTenants tenants_;  // with several keys: whose content each slot holds
  TokenCounter tokens_;
  Metrics metrics_;
  EngineLink engine_;
  std::unique_ptr<session::SessionStore> store_;
  std::shared_ptr<ResponseStore>
      responses_;  // for previous_response_id; written through to a store once open
  std::unique_ptr<KvKeeper> kv_;
  std::atomic<bool> store_failing_{false};  // the last save failed
  std::mutex unsaved_mu_;
  std::set<std::string> unsaved_;  // sessions whose last save failed; guarded by unsaved_mu_
  std::atomic<int64_t> store_reads_paused_until_ms_{0};  // steady-clock ms; see open_store()
  std::atomic<int64_t> pruned_at_ms_{0};                 // steady-clock ms of the last prune
  void prune_store();                                    // REQUIRES: store_ open
  Admission admission_;
  std::atomic<uint64_t> request_serial_{0};
  std::mutex context_mu_;
  uint64_t context_tokens_ = 0;                  // guarded by context_mu_
  uint64_t context_generation_ = ~0ULL;          // guarded by context_mu_
  std::mutex probe_mu_;                          // template_marks()'s answer, per engine generation:
  std::optional<TemplateMarks> template_marks_;  // guarded by probe_mu_
  bool template_answered_ = false;               // guarded by probe_mu_ (else asked again at probe_retry_)
  uint64_t template_marks_generation_ = ~0ULL;   // guarded by probe_mu_
  std::chrono::steady_clock::time_point probe_retry_{};  // guarded by probe_mu_
};

}  // namespace kvgate::gateway
