// MessagesAdapter: Anthropic's Messages API (POST /v1/messages) as a chat turn's wire API
// (turn.h). The request is converted to a chat-completions body by wire/anthropic_request.h;
// the turn's answer is written as a `message` (wire/anthropic_reply.h) or as Anthropic's
// event stream (wire/anthropic_stream.h) with `ping` events as keep-alives; errors in
// Anthropic's shape ({"type":"error","error":{"type","message"}}) with its statuses (an
// overloaded engine: 529), inside a started stream as an `error` event.
//
// The conversation a request names: only the X-Session-Id header. `metadata.user_id` is not
// used: Claude Code sends one per run, shared by its main conversation, its sub-agents and
// its side requests (titles, summaries), so naming by it would make different conversations
// one; they are recognised by their content instead.
//
// Thread-safety: one per request (see TurnOutput).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/event_output.h"
#include "wire/anthropic_stream.h"
#include "wire/wire_error.h"

namespace kvgate::gateway {

// Anthropic's error answer for a WireError (Retry-After when `retry_after_s`).
void send_anthropic_error(http::ResponseWriter& writer, const wire::WireError& error,
                          std::optional<int> retry_after_s = std::nullopt);
// Logs (debug) what a wire conversion tolerated but did not use.
void log_ignored(std::string_view api, const std::vector<std::string>& ignored);
// kvgate's own error (OpenAI's shape) in Anthropic's.
wire::WireError anthropic_error_of(const ApiError& error);

class MessagesAdapter final : public EventOutput {
 public:
  // `relay`: head grace and keep-alive interval (the keep-alive text is replaced by pings).
  MessagesAdapter(http::ResponseWriter& writer, RelayOptions relay, std::string model);

  // The turn's input for a /v1/messages request, or the 400 it gets.
  static wire::WireResult<TurnInput> input(const http::HttpRequest& request, std::string scope,
                                           std::string& model);

  void answer(const nlohmann::json& response, std::string_view engine_text) override;
  void context_managed(const ContextReport& report) override { context_ = report; }

 private:
  std::vector<std::string> start_events() override;
  std::vector<std::string> chunk_events(const nlohmann::json& chunk) override;
  std::vector<std::string> finish_events() override;
  std::vector<std::string> error_events(const ApiError& error) override;
  void send_error(const ApiError& error) override;

  std::string model_;
  std::optional<wire::MessagesStream> stream_;  // from the first chunk (its id names the message)
  std::optional<ContextReport> context_;        // the request asked for context management
};

}  // namespace kvgate::gateway
