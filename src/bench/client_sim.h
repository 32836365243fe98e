// ClientSim: a simulated agent client. Given a behaviour (ClientSpec) and a seed it produces,
// turn by turn, the exact chat-completions request body the client sends, taking the
// previous turn's answer — the assistant message the server returned — as input. Like a real
// agent it echoes that message verbatim (role, content, tool_calls) in its history and
// answers each tool call with a result.
//
// Behaviours (ClientSpec; the flags combine):
//   growth       every turn adds `growth_tokens` of new material (±50%): a user message, or
//                the results of the calls the model made; text kinds by `mix` (prose, code,
//                log, Chinese; client_text.h). The model's reply adds to the conversation too.
//   windows      `window_messages`: after each turn only the last K messages after the
//                system prompt are kept (whatever they are: a window may start with an
//                assistant turn or orphaned tool results, as simple clients do);
//                `window_tokens`: the oldest messages are dropped until those after the
//                system prompt are under a budget, estimated by bytes (estimated_tokens()).
//                A window may be larger than the server's context.
//   tools        tools are declared on every request once `tool_turns` > 0; that share of
//                turns asks for a call (tool_choice "required", parallel_tool_calls) and the
//                next turn answers every call the reply made, in call order; a result is
//                huge (20–60% of `context_tokens`) with probability `huge_results`. With
//                `reorder_results` the results of a multi-call turn are re-sent in another
//                order on the turn after.
//   ids          `ids.system`: a clock and a request id on the system prompt's first line,
//                new on every request; `ids.first_user`: an environment block (request id,
//                time, trace id) heading the first user message, new on every request;
//                `ids.messages`: each new user message starts with its own request id and
//                time; `ids.tool_results`: ids and UUIDs inside tool results.
//   self-summary every `summarise_every` turns the client asks the model for a summary of
//                the conversation (its history + an instruction, tool_choice "none"), then
//                replaces its history with one user message "This session is being continued
//                from a previous conversation ..." carrying the reply, plus the new turn — as
//                Claude Code's and Codex's auto-compaction do. A failed summary request
//                leaves the history as it was.
//   edits        every `edit_every` turns one earlier user message is rewritten, or an earlier
//                tool result cleared ("[Old tool result content cleared]").
//   pasted       the first request carries a pasted earlier conversation of `pasted_history`
//                × `context_tokens` tokens (user/assistant pairs) before the first question.
//   parallel     `parallel` clients of one behaviour run side by side (the harness interleaves
//                them, clients.h); they share the system prompt and tools (one agent, several
//                tasks), their content comes from their own seeds.
// A request that failed (no reply) stays in the history; the next turn adds its material
// after it, as a user who types again.
//
// Determinism: the bodies are a function of (spec, seed, client index, the replies given);
// unit-tested. The client knows nothing of kvgate: it sees only the answers.
//
// Thread-safety: one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/client_text.h"
#include "util/result.h"

namespace kvgate::bench {

// Weights of the text kinds of new material (user messages pick among all four; a user
// message of code or log is a sentence and a fenced block).
struct TextMix {
  double prose = 0.5, code = 0.25, log = 0.25, chinese = 0;
};

struct IdPlaces {
  bool system = false;
  bool first_user = false;
  bool messages = false;
  bool tool_results = false;
  bool any() const { return system || first_user || messages || tool_results; }
};

struct ClientSpec {
  std::string name;                 // the behaviour's name in reports
  uint64_t growth_tokens = 500;     // new material per turn (user text, tool results)
  TextMix mix;
  uint64_t system_tokens = 1200;    // the system prompt
  uint64_t context_tokens = 16384;  // the model context the client is configured with
  int max_tokens = 48;              // of each reply
  bool stream = false;
  size_t window_messages = 0;       // keep the last K messages after the system prompt (0: all)
  uint64_t window_tokens = 0;       // keep those under this estimate (0: no limit)
  double tool_turns = 0;            // share of turns that require a tool call
  double huge_results = 0;          // probability that a tool result is huge
  bool reorder_results = false;     // re-send a multi-call turn's results in another order
  IdPlaces ids;
  size_t summarise_every = 0;       // self-summary every N turns (0: never)
  int summary_max_tokens = 256;     // of the summary reply
  size_t edit_every = 0;            // rewrite an earlier message every N turns (0: never)
  double pasted_history = 0;        // first request: pasted history of this × context_tokens
  size_t parallel = 1;              // clients side by side
};

// One request of the client and what the client knows about it.
struct ClientTurn {
  size_t number = 0;  // 1-based
  nlohmann::json body;
  // "first", "user", "tool_results", "summary_request", "continuation"
  std::string kind;
  // The client started a conversation with this request (turn 1, the continuation after a
  // self-summary): nothing of its earlier requests is in it but the system prompt and tools.
  bool new_conversation = false;
  // A self-summary's continuation that carries a line of the reply it summarises that kvgate
  // recognises the conversation by (session::line_hashes()): it goes on in the same session.
  bool carries_reply = false;
  // body.messages[increment_from ..] are the previous reply and this turn's new material
  // (nullopt on a new conversation).
  std::optional<size_t> increment_from;
  // The first message whose content the client changed since its previous request (an
  // edit); dropped, reordered and volatile values do not count.
  std::optional<size_t> rewritten_from;
  bool asks_tool_call = false;  // tool_choice "required"
  size_t tool_results = 0;      // results this request answers
  size_t dropped = 0;           // messages the window dropped this turn
  std::vector<std::string> notes;  // what the client did, for failure reports
};

class ClientSim {
 public:
  // The system prompt and tools come from `seed` alone (shared by a run's parallel
  // clients); everything else from (seed, client).
  ClientSim(ClientSpec spec, uint64_t seed, size_t client = 0);

  // The next request. `reply`: the assistant message of the answer to the previous request
  // (choices[0].message), nullopt on the first turn or when that request failed.
  ClientTurn next(const std::optional<nlohmann::json>& reply);

  const ClientSpec& spec() const { return spec_; }
  size_t turns() const { return turn_; }

 private:
  struct Entry {
    nlohmann::json message;
    bool env_block = false;  // the first user message: gets the environment block (ids.first_user)
    bool edited = false;     // rewritten this turn
    bool reordered = false;  // re-sent in another order this turn
  };

  ClientTurn first_turn();
  ClientTurn continuation(const std::string& summary);
  ClientTurn summary_request(ClientTurn t);
  void take_reply(const nlohmann::json& reply, ClientTurn& t);
  void reorder_last_results(ClientTurn& t);
  void edit_earlier(ClientTurn& t);
  void add_results(ClientTurn& t);
  void add_user_message();
  void apply_window(ClientTurn& t);
  // The request body of the current history (+ `extra` messages that are not kept).
  nlohmann::json compose(bool require_tool, const nlohmann::json& extra = nlohmann::json::array(),
                         bool summary = false);
  void finish(ClientTurn& t, size_t added);
  std::string system_text();
  std::string user_text(uint64_t tokens);
  std::string result_text(const std::string& tool, uint64_t tokens);
  uint64_t turn_growth();

  ClientSpec spec_;
  Rng rng_;
  size_t turn_ = 0;
  int64_t clock_ms_ = 0;
  std::string system_base_;
  nlohmann::json tools_;
  std::vector<Entry> history_;        // after the system prompt
  nlohmann::json pending_calls_;      // the calls of the last reply, to answer
  std::vector<size_t> last_results_;  // history indices of the results sent last turn
  bool summary_asked_ = false;        // the previous request was a summary request
};

// The standard family of behaviours, sized for a client configured with `context_tokens`
// and runs of `turns` turns (a message window of `turns` messages slides in mid-run; the
// token windows are half the context and the whole context, the latter above kvgate's high
// watermark):
// append, append-zh, window-messages, window-tokens, window-large, tools, ids,
// self-summary, edits, pasted, parallel, user-report (the combination a user measured:
// a 30-message window, multi-call tool turns re-sent in another order, request ids).
// Behaviours that declare tools ask for replies of up to 128 tokens (two calls fit).
std::vector<ClientSpec> client_family(uint64_t context_tokens, size_t turns);
// The family's behaviours named in `names` (comma-separated; "all": every one).
Result<std::vector<ClientSpec>> select_behaviours(const std::vector<ClientSpec>& family, std::string_view names);

// A comma-separated list of seeds ("1,2,3"); an item that is not a number is an error naming it.
Result<std::vector<uint64_t>> parse_seeds(std::string_view text);

}  // namespace kvgate::bench
