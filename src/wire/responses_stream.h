// ResponsesStream: the OpenAI Responses streaming events for a streamed chat completion.
//
// Every event carries `type` and a `sequence_number` counting from 0; each is sent as
// "event: TYPE\ndata: JSON\n\n". Grammar:
//   response.created, response.in_progress            (the response, status in_progress)
//   per output item, in output order (OutputSequencer: one open at a time):
//     response.output_item.added
//     reasoning:  content_part.added (reasoning_text), reasoning_text.delta*,
//                 reasoning_text.done, content_part.done
//     message:    content_part.added (output_text), output_text.delta*, output_text.done,
//                 content_part.done
//     function:   function_call_arguments.delta*, function_call_arguments.done
//     response.output_item.done
//   response.completed | response.incomplete          (the whole response, as
//                                                      chat_to_response builds it)
// or, when the gateway gives up, response.failed (status failed, error {code, message}).
// Item ids, statuses and usage follow responses_reply.h; the done events carry the full
// text, which equals the concatenated deltas.
//
// Thread-safety: none; one encoder per streamed reply.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "wire/output_sequence.h"
#include "wire/responses_request.h"
#include "wire/wire_error.h"

namespace kvgate::wire {

class ResponsesStream {
 public:
  ResponsesStream(ResponsesConversion conversion, std::string response_id, int64_t created_at);

  // response.created, response.in_progress. Called implicitly by the first on_chunk() /
  // finish() / failed() if not before.
  std::vector<std::string> start();
  std::vector<std::string> on_chunk(const nlohmann::json& chat_chunk);
  // A compaction item (its encrypted_content, context_edits.h) as the first output item: the
  // items on_chunk() gives follow it. Call before the first on_chunk().
  std::vector<std::string> compaction(const std::string& encrypted_content);
  // Closes what is open, then response.completed or response.incomplete. Later calls return
  // nothing.
  std::vector<std::string> finish();
  // response.failed with error {code, message}: code rate_limit_exceeded for a 429,
  // invalid_prompt for other 4xx, server_error otherwise. Ends the stream like finish().
  std::vector<std::string> failed(const WireError& error);

  // The response as the last event sent it (for the gateway to store).
  const ClientJson& response() const { return response_; }

 private:
  struct Item {
    BlockKind kind = BlockKind::kText;
    std::string call_id;
    std::string name;
    std::string text;  // text, reasoning or arguments so far
  };

  std::string event(const std::string& type, ClientJson fields);
  // `incomplete`: the reply stopped at the token limit; the last item closed is marked so.
  void emit(const std::vector<BlockEvent>& events, bool incomplete, std::vector<std::string>& out);
  void open_item(const BlockEvent& e, std::vector<std::string>& out);
  void delta_item(const BlockEvent& e, std::vector<std::string>& out);
  void close_item(const BlockEvent& e, bool last, std::vector<std::string>& out);
  void ensure_started(std::vector<std::string>& out);

  ResponsesConversion conversion_;
  std::string response_id_;
  int64_t created_at_ = 0;
  OutputSequencer sequencer_;
  std::vector<Item> items_;                  // by output index
  ClientJson output_ = ClientJson::array();  // the done items
  ClientJson response_;
  int64_t sequence_ = 0;
  bool started_ = false;
  bool ended_ = false;
  int64_t first_item_ = 0;  // the output index of the first item on_chunk() gives
};

}  // namespace kvgate::wire
