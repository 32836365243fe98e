// ChatCompletionsAdapter: OpenAI's chat completions (POST /v1/chat/completions) as a chat
// turn's wire API (turn.h). The request body is the turn's input as it is; the output is
// written as chat completions clients read it:
//   - streamed: the engine's events relayed exactly as the engine sent them (no
//     re-serialisation), kvgate's own chunks as "data: JSON", "data: [DONE]" at the end,
//     keep-alives and prefill progress as SSE comments, an error after the stream began as a
//     "data: {"error": …}" event;
//   - whole: the chat.completion as the engine wrote it (or as kvgate changed it);
//   - errors before a stream: {"error": …} with the error's status (and Retry-After).
//
// Thread-safety: one per request, used by the request's thread (client_gone() also from the
// turn's watch thread; the stream's keep-alives come from StreamRelay's own thread).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/conversation_name.h"
#include "gateway/stream_relay.h"
#include "gateway/turn.h"
#include "http/http_server.h"

namespace kvgate::gateway {

class ChatCompletionsAdapter final : public TurnOutput {
 public:
  // `relay`: head grace and keep-alive interval of a streamed answer (the text is SSE comments).
  ChatCompletionsAdapter(http::ResponseWriter& writer, RelayOptions relay);
  ~ChatCompletionsAdapter() override;

  // The turn's input: the parsed body (parse_json_body), the conversation it names, the
  // caller's scope; or the 400 the body gets.
  static ApiResult<TurnInput> input(const http::HttpRequest& request, std::string scope);

  bool client_gone() override;
  void open_stream(CancelScope& cancel) override;
  bool begin_stream() override;
  bool engine_chunk(const nlohmann::json& chunk, const std::string& raw) override;
  bool engine_error(const ApiError& error, const std::string& raw) override;
  bool kvgate_chunk(const nlohmann::json& chunk) override;
  void progress(std::string text) override;
  void end_stream(bool complete) override;
  void answer(const nlohmann::json& response, std::string_view engine_text) override;
  void fail(const ApiError& error) override;

 private:
  http::ResponseWriter& writer_;
  RelayOptions relay_options_;
  std::unique_ptr<StreamRelay> relay_;  // from open_stream()
  bool answered_ = false;               // some of the answer proper (an event) went out
};

// The answer for an ApiError: its status, JSON content type and Retry-After when it has one.
void send_api_error(http::ResponseWriter& writer, const ApiError& error);

}  // namespace kvgate::gateway
