// ResponsesAdapter: OpenAI's Responses API (POST /v1/responses) as a chat turn's wire API
// (turn.h). The request is converted to a chat-completions body by wire/responses_request.h
// (with the stored conversation of `previous_response_id`, response_store.h); the turn's
// answer is written as a `response` object (wire/responses_reply.h) or as the typed event
// stream with sequence numbers (wire/responses_stream.h; keep-alives are SSE comments, which
// the API's clients skip). Errors keep OpenAI's shape, as chat completions; after a stream
// began, a response.failed event.
//
// The conversation a request names: the X-Session-Id header, else `prompt_cache_key`
// ("cache:" ID, as for chat completions). A request continuing by previous_response_id
// carries the stored conversation, so it is recognised by its content.
//
// Thread-safety: one per request (see TurnOutput).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "gateway/event_output.h"
#include "wire/responses_request.h"
#include "wire/responses_stream.h"

namespace kvgate::gateway {

class ResponsesAdapter final : public EventOutput {
 public:
  // kCompact: POST /v1/responses/compact — the answer is a response.compaction object with
  // the turn's compaction item, never a stream.
  enum class Mode { kResponse, kCompact };
  ResponsesAdapter(http::ResponseWriter& writer, RelayOptions relay, wire::ResponsesConversion conversion,
                   Mode mode = Mode::kResponse);

  // The turn's input for a converted request.
  TurnInput input(const http::HttpRequest& request, std::string scope) const;

  void answer(const nlohmann::json& response, std::string_view engine_text) override;
  void context_managed(const ContextReport& report) override { context_ = report; }
  const std::optional<ContextReport>& context() const { return context_; }

  // Called with the response before its client can read it (so a client that continues from
  // it at once finds it stored).
  void on_final(std::function<void(const wire::ClientJson& response)> keep) { keep_ = std::move(keep); }

  const std::string& id() const { return id_; }
  int64_t created_at() const { return created_at_; }
  const wire::ResponsesConversion& conversion() const { return conversion_; }

 private:
  // The output item of the turn's compaction (REQUIRES: context_ holds a summary).
  wire::ClientJson compaction_item() const;
  std::vector<std::string> start_events() override;
  std::vector<std::string> chunk_events(const nlohmann::json& chunk) override;
  std::vector<std::string> finish_events() override;
  std::vector<std::string> error_events(const ApiError& error) override;
  void send_error(const ApiError& error) override;

  wire::ResponsesConversion conversion_;
  std::string id_;
  int64_t created_at_ = 0;
  std::optional<wire::ResponsesStream> stream_;
  std::function<void(const wire::ClientJson&)> keep_;
  Mode mode_ = Mode::kResponse;
  std::optional<ContextReport> context_;  // the request asked for context management
};

}  // namespace kvgate::gateway
