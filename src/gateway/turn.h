// A chat turn: one request of a conversation, from the chat-completions body a wire API hands
// over to the end of the answer its client receives. Every wire API kvgate serves (chat
// completions today; Anthropic Messages and OpenAI Responses through src/wire) runs the same
// turn — recognition, the stabiliser, token accounting, compaction, send / relay / rescue,
// durability, metrics — through an adapter: the adapter turns its request into a TurnInput
// (a chat-completions body and what only the adapter knows) and implements TurnOutput to
// write what the turn produces in its own format. The turn knows no wire format but the
// engine's own (chat completions and its chunks).
//
// The steps, in order (class Turn, turn_steps.h; Gateway::run_turn runs them):
//   1. prepare     turn_request.h   prepare_chat(): bounds, history repair, validation;
//                                   stabilise(): thinking policy, historical reasoning, tool-result
//                                   order (pure)
//   2. recognise   turn.cc          the conversation (SessionTable), then a place (Admission)
//   3. reconcile   turn.cc          session::take_in (intake.h, pure): the request brought into the
//                                   session's conversation under the isolation invariant
//   4. bind        turn.cc          slot, seed, stream options; the engine available
//   5. restore     turn.cc          the view; the slot given this conversation's saved state when it
//                                   matches (kvstate/kv_keeper.h), and only this key's content
//   6. budget      turn_budget.cc   watermarks and the bound on an extended prompt (turn_budget.h,
//                                   pure), the exact count, compaction past the high watermark
//                                   (Gateway::compact_conversation, shared with manual compaction)
//   7. send        turn_send.cc     attempts with retries: a restarted engine, a reply that filled
//                                   the context, a refused template, an overflow (compact harder);
//                                   turn_stream.cc relays a stream, turn_rescue.cc rescues output
//                                   the engine could not parse
//   8. commit      turn_commit.cc   accounting, the prefix-break cause (turn_accounting.h, pure),
//                                   session update, persist, the end of the answer, saved engine
//                                   state, the request log
//
// Thread-safety: a TurnOutput is called from the turn's thread, except client_gone(), which
// may also be called from a watch thread while the turn waits for a whole answer, and
// progress(), which a watch thread calls while a stream's engine is silent.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/api_error.h"
#include "gateway/conversation_name.h"
#include "upstream/upstream.h"
#include "wire/context_edits.h"

namespace kvgate::gateway {

struct TurnInput {
  // A chat-completions request body as the client (or the adapter's conversion) wrote it,
  // parsed with parse_json_body (chat_request.h); the turn checks, repairs and validates it.
  nlohmann::json body;
  std::string scope;                      // the caller's key scope (session.h: scope_of_key)
  std::optional<ConversationName> name;  // the conversation the client named, if it did
  bool stream = false;                    // answer as a stream (the body's `stream` is made to agree)
  bool include_usage = false;             // pass the engine's usage-only chunk to the output
  std::string api = "chat";               // the route label in metrics and logs
  // The body's tools as the client wrote them (JSON text, keys in its order), if known: the
  // engine is sent them so (ChatRequest::tools_text).
  std::string tools_text;
  // The context management the client asked for (turn_context.cc serves it).
  wire::ContextEdits edits;
};

// What a turn did for the client's context management, told to its output before the engine
// is asked (TurnOutput::context_managed).
struct ContextReport {
  std::optional<std::string> summary;  // a compaction: the answer opens with this summary
  bool paused = false;                 // nothing is sampled after it (finish_reason "compaction")
  // The engine's figures for writing the summary ({"prompt_tokens", "cached_tokens",
  // "generated_tokens"}), when it wrote one.
  nlohmann::json summary_usage = nlohmann::json::object();
  // Anthropic's applied_edits entries ({"type", "cleared_tool_uses", "cleared_input_tokens"}).
  nlohmann::json applied_edits = nlohmann::json::array();
};

// What a turn delivers, in the adapter's wire format.
class TurnOutput {
 public:
  virtual ~TurnOutput() = default;

  // Only for a request with context management (TurnInput::edits), once, before the answer
  // starts: what was done. The adapter reports it in its API's shape.
  virtual void context_managed(const ContextReport& /*report*/) {}

  // Non-blocking: whether the client has gone (polled while the turn waits).
  virtual bool client_gone() = 0;

  // Streamed turns (TurnInput::stream). open_stream() comes once, just before the engine is
  // first asked: from then on the adapter may start its stream by itself (when the engine is
  // slow to answer) and writes keep-alives while nothing else is written; it cancels `cancel`
  // when its client leaves. The calls below return false once the client is gone.
  virtual void open_stream(CancelScope& cancel) = 0;
  // The engine accepted the request: the stream starts now if it has not yet.
  virtual bool begin_stream() = 0;
  // One chunk of the engine's answer, parsed, with its event as the engine sent it
  // ("data: {…}\n\n").
  virtual bool engine_chunk(const nlohmann::json& chunk, const std::string& raw) = 0;
  // An error the engine reported inside its stream (`raw` its event, `error` its meaning);
  // the turn goes on reading the stream.
  virtual bool engine_error(const ApiError& error, const std::string& raw) = 0;
  // A chunk kvgate wrote: a rescued reply, the end of a reply that filled the context, a
  // finish reason corrected.
  virtual bool kvgate_chunk(const nlohmann::json& chunk) = 0;
  // What the engine is doing ("prefill 1200/5000 tokens (0 cached)"), for the keep-alives.
  // Also called from the turn's watch thread while the engine is silent (upstream/silence_watch.h).
  virtual void progress(std::string text) = 0;
  // The end of the stream; `complete`: the engine finished its answer (chat completions
  // then sends "data: [DONE]"). Called after the session was saved, also after fail().
  virtual void end_stream(bool complete) = 0;

  // A whole (non-streamed) answer: the chat.completion object, and the engine's own text of
  // it when kvgate did not change it (empty otherwise), to be sent as it is.
  virtual void answer(const nlohmann::json& response, std::string_view engine_text) = 0;

  // The turn failed: an error answer when no stream has started, else an error event in
  // the stream. Not called for a client that has gone.
  virtual void fail(const ApiError& error) = 0;
};

}  // namespace kvgate::gateway
