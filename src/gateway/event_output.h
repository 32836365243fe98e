// EventOutput: the part of a TurnOutput that the event-stream wire APIs (Anthropic Messages,
// OpenAI Responses) share. They do not relay the engine's events: each chat chunk is
// re-encoded by the API's encoder (src/wire) into its own typed events, and an error is
// written in the API's own shape.
//
// Engine errors inside a stream: the turn reads on after one (the engine may still end the
// reply, or the turn may end it as cut by length), so the error is held; it is written only
// when the stream then ends incomplete. fail() after the stream started writes the API's
// error events; before, an error answer.
//
// Thread-safety: one per request (see TurnOutput).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/stream_relay.h"
#include "gateway/turn.h"
#include "http/http_server.h"

namespace kvgate::gateway {

class EventOutput : public TurnOutput {
 public:
  bool client_gone() override { return writer_.client_gone(); }
  void open_stream(CancelScope& cancel) override;
  bool begin_stream() override;
  bool engine_chunk(const nlohmann::json& chunk, const std::string& raw) override;
  bool engine_error(const ApiError& error, const std::string& raw) override;
  bool kvgate_chunk(const nlohmann::json& chunk) override;
  void progress(std::string text) override;
  void end_stream(bool complete) override;
  void fail(const ApiError& error) override;

 protected:
  EventOutput(http::ResponseWriter& writer, RelayOptions relay)
      : writer_(writer), relay_options_(std::move(relay)) {}
  ~EventOutput() override;

  // The API's encoder: the events that open the stream (not written again when the writer
  // continues a stream another engine began), those one chat chunk gives, those that end a
  // complete reply, those that report `error` after the stream began.
  virtual std::vector<std::string> start_events() = 0;
  virtual std::vector<std::string> chunk_events(const nlohmann::json& chunk) = 0;
  virtual std::vector<std::string> finish_events() = 0;
  virtual std::vector<std::string> error_events(const ApiError& error) = 0;
  // The error answer before any stream began.
  virtual void send_error(const ApiError& error) = 0;

  http::ResponseWriter& writer_;

 private:
  bool write(const std::vector<std::string>& events);
  // Only the opening events and keep-alives went out when the engine went away: the request
  // is handed to another engine, which answers in this stream (ResponseWriter::hand_on).
  bool hand_on(int status, const std::vector<std::string>& error_events);

  RelayOptions relay_options_;
  std::unique_ptr<StreamRelay> relay_;
  bool started_ = false;                  // start_events() written
  bool answered_ = false;                 // events of the answer proper written
  bool failed_ = false;                   // error events written
  std::optional<ApiError> engine_error_;  // held until the stream ends
};

}  // namespace kvgate::gateway
