// MessagesStream: the Anthropic Messages streaming events for a streamed chat completion.
//
// Grammar (what a client may rely on, whatever chunks arrive):
//   message_start
//   (content_block_start(i) content_block_delta(i)* content_block_stop(i))*  i = 0, 1, 2, …
//   message_delta (stop_reason, stop_sequence, final usage)   exactly once
//   message_stop                                              last
// with ping events anywhere the gateway sends them. Blocks follow OutputSequencer: one open
// at a time — thinking (thinking_delta), text (text_delta), tool_use (input_json_delta; id =
// the chat tool-call id, input built from the raw argument pieces). message_delta goes out
// once the chunks have given both the finish reason and the usage (llama-server's last two
// chunks), or at finish(); content arriving after it is dropped (no engine sends any).
//
// message_start's usage carries the input tokens the gateway knows before the engine answers
// (0 otherwise); message_delta carries the final input_tokens / cache_read_input_tokens /
// cache_creation_input_tokens / output_tokens, which clients take over message_start's
// (see anthropic_reply.h for how they are counted). Thinking blocks carry no signature.
//
// Thread-safety: none; one encoder per streamed reply.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "wire/output_sequence.h"
#include "wire/wire_error.h"

namespace kvgate::wire {

class MessagesStream {
 public:
  MessagesStream(std::string model, std::string message_id);

  // event: message_start. Called implicitly by the first on_chunk()/finish() if not before.
  std::string start(int64_t input_tokens = 0);
  // The events one chat.completion.chunk gives (often none).
  std::vector<std::string> on_chunk(const nlohmann::json& chat_chunk);
  // Closes what is open, then message_delta (if not sent) and message_stop. Later calls of
  // on_chunk() and finish() return nothing.
  std::vector<std::string> finish();

  // A compaction block holding `summary`, as the first block: the blocks on_chunk() gives
  // follow it. Call before the first on_chunk().
  std::vector<std::string> compaction(const std::string& summary);
  // What message_delta reports of the request's context management ({"applied_edits": …}).
  void set_context_management(ClientJson value) { context_management_ = std::move(value); }

  static std::string ping();
  // event: error, e.g. ("overloaded_error", "…") when the engine fails mid-stream.
  static std::string error(std::string_view type, std::string_view message);

 private:
  void emit(const std::vector<BlockEvent>& events, std::vector<std::string>& out) const;
  void send_message_delta(std::vector<std::string>& out);
  void ensure_started(std::vector<std::string>& out);

  std::string model_;
  std::string message_id_;
  OutputSequencer sequencer_;
  bool started_ = false;
  bool delta_sent_ = false;
  bool stopped_ = false;
  int64_t first_block_ = 0;  // the index of the first block on_chunk() gives
  ClientJson context_management_;
};

}  // namespace kvgate::wire
