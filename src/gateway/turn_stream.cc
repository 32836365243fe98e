// One streamed attempt of a chat turn (Turn::attempt_stream): the engine's events go to the
// client as they come (TurnOutput::engine_chunk, byte for byte for chat completions), except
//   - [DONE], sent after the session is saved (commit);
//   - the engine's pings and prefill progress, which travel as the adapter's keep-alives;
//   - the usage-only chunk, unless the client asked for it;
//   - with tools declared, everything from the first tool-call delta on, held back until the
//     end: if the engine then rejects its output, the rescued calls replace it and the client
//     never sees a half-parsed call;
//   - a finish chunk whose reason ik gets wrong, held until the usage says (upstream/finish_reason.h).
// An output the engine's parser rejected is rescued (turn_rescue.cc) and ends the stream as
// kvgate's own chunks; a reply that filled the context ends as "length".
#include <fmt/format.h>

#include "gateway/engine_api_error.h"
#include "upstream/engine_errors.h"
#include "upstream/finish_reason.h"
#include "upstream/silence_watch.h"
#include "gateway/turn_steps.h"
#include "http/sse.h"
#include "util/json.h"
#include "util/time.h"

namespace kvgate::gateway {

using http::SseEvent;
using http::SseParser;

using nlohmann::json;

namespace {

// The longest line accepted in an engine's event stream (a chunk is a few hundred bytes;
// anything this long is not SSE).
constexpr size_t kMaxEngineEventLine = 8 << 20;

bool starts_tool_calls(const json& chunk) {
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array()) return false;
  for (const auto& c : *choices) {
    if (c.is_object() && c.contains("delta") && c["delta"].is_object() && c["delta"].contains("tool_calls")) return true;
  }
  return false;
}

// The engine names the model by its file's path; the client gets the id it asked for or the
// one /v1/models lists. The event's text keeps its bytes but for that value.
void name_model(json& chunk, std::string& raw, const std::string& model) {
  auto m = chunk.find("model");
  if (m == chunk.end() || !m->is_string() || m->get_ref<const std::string&>() == model) return;
  const std::string from = "\"model\":" + util::json_text(*m);
  *m = model;
  if (auto at = raw.find(from); at != std::string::npos) {
    raw.replace(at, from.size(), "\"model\":" + util::json_text(*m));
  } else {
    raw = "data: " + util::json_text(chunk) + "\n\n";
  }
}

bool usage_only(const json& chunk) {
  return chunk.contains("usage") && chunk.contains("choices") && chunk["choices"].is_array() &&
         chunk["choices"].empty();
}

}  // namespace

struct Turn::StreamState {
  StreamState(SendOutcome& o, bool ik_stop, const json& body, std::string answer_model)
      : out(o), model(std::move(answer_model)), finish(ik_stop, body), hold_calls(body.contains("tools") && body["tools"].is_array() &&
                                                   !body["tools"].empty()) {}
  SendOutcome& out;
  const std::string model;  // the id the client's chunks carry
  FinishReasonFix finish;
  const bool hold_calls;
  bool holding = false;
  std::vector<RelayChunk> held;
  std::optional<std::string> parse_error;  // the engine rejected its output: rescued at the end
  std::string chunk_id = "chatcmpl-kvgate";
  SseParser parser{kMaxEngineEventLine};
  size_t bad_events = 0;
  std::string error_body;  // a non-200 answer
};

SendOutcome Turn::attempt_stream() {
  SendOutcome out;
  StreamState s(out, plan::says_stop_at_max_tokens(options_.engine_fork), req_.body, model_name());
  // The engine's silence is judged by its slot's progress (upstream/silence_watch.h): a silent engine
  // that is working is waited for, up to kWorkingSilence times the time-out.
  constexpr int kWorkingSilence = 12;
  const std::chrono::milliseconds timeout = s_.engine.upstream_timeout(prompt_estimate(), false);
  CancelScope attempt_cancel;
  SilenceWatch watch(s_.engine.upstream(), slot_, cancel_, attempt_cancel,
                     {.timeout = timeout, .poll = std::max(options_.keepalive, std::chrono::milliseconds(1000))},
                     [this](std::string text) { out_.progress(std::move(text)); });
  auto res = s_.engine.upstream().stream(
      "/v1/chat/completions", upstream_text_,
      {.on_start = [&](int status, const std::string&) {
         watch.heard();
         out.status = status;
         // An engine that accepted the request: the client's stream can start now.
         return status != 200 || out_.begin_stream();
       },
       .on_data = [&](std::string_view data) {
         watch.heard();
         return read_events(s, data);
       }},
      timeout * kWorkingSilence, &attempt_cancel);
  if (!res.ok() && watch.stuck()) {
    res = UpstreamError{.kind = UpstreamFailure::kTimeout,
                        .message = fmt::format("the engine sent nothing for {} s and its slot made no progress",
                                               std::chrono::duration_cast<std::chrono::seconds>(timeout).count())};
  }
  if (watch.polls() > 0) s_.metrics.add("engine_silence_polls_total", static_cast<double>(watch.polls()));
  end_stream_attempt(s, res);
  return out;
}

bool Turn::read_events(StreamState& s, std::string_view data) {
  if (s.out.status != 200) {
    s.error_body.append(data);
    return s.error_body.size() < (1 << 20);
  }
  for (auto& ev : s.parser.feed(data)) {
    if (ev.comment_only) continue;  // the engine's pings; the adapter sends its own
    if (!take_event(s, ev)) return false;
  }
  return !s.parser.failed();  // not an event stream: stop reading it
}

bool Turn::take_event(StreamState& s, SseEvent& ev) {
  SendOutcome& out = s.out;
  if (ev.is_done()) {
    out.saw_done = true;  // sent after the session is saved
    return true;
  }
  json chunk = json::parse(ev.data, nullptr, false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    ++s.bad_events;  // not an OpenAI chunk: never relayed to the client
    return true;
  }
  bool forward = true;
  name_model(chunk, ev.raw, s.model);
  if (chunk.contains("id") && chunk["id"].is_string()) s.chunk_id = chunk["id"].get<std::string>();
  if (chunk.contains("error")) {
    const EngineErrorInfo e = classify_engine_error(500, ev.data);
    if (e.kind == EngineErrorKind::kOutput) {
      s.parse_error = e.message;  // replaced by the rescue
      return true;
    }
    if (e.kind == EngineErrorKind::kContextFilled && out.reply.has_output()) {
      out.context_filled = true;  // the reply ends here, cut by length
      return true;
    }
    out.saw_error_event = true;
  }
  out.reply.add_chunk(chunk);
  if (auto p = chunk.find("prompt_progress"); p != chunk.end() && p->is_object()) {
    out_.progress(fmt::format("prefill {}/{} tokens ({} cached)", p->value("processed", 0), p->value("total", 0),
                              p->value("cache", 0)));
    forward = false;  // progress travels as keep-alives
  }
  if (usage_only(chunk) && !in_.include_usage) forward = false;
  if (s.hold_calls && !s.holding && starts_tool_calls(chunk)) s.holding = true;
  if (out.ttft_ms < 0 && out.reply.has_output()) out.ttft_ms = util::ms_since(t0_);
  // The finish-reason fix may hold a chunk, or release a held one on a chunk that is itself
  // not relayed.
  for (auto& c : s.finish.on_chunk(std::move(chunk), std::move(ev.raw), forward)) {
    if (s.holding) {
      s.held.push_back(std::move(c));
    } else if (!emit(c)) {
      return false;
    } else {
      out.relayed = true;
    }
  }
  return true;
}

bool Turn::emit(const RelayChunk& c) {
  if (c.raw.empty()) return out_.kvgate_chunk(c.chunk);
  if (c.chunk.contains("error")) return out_.engine_error(engine_api_error(500, util::json_text(c.chunk)), c.raw);
  return out_.engine_chunk(c.chunk, c.raw);
}

void Turn::end_stream_attempt(StreamState& s, const UpstreamResult<int>& res) {
  SendOutcome& out = s.out;
  if (s.bad_events > 0) s_.metrics.add("engine_bad_events_total", static_cast<double>(s.bad_events));
  if (!res.ok()) {
    out.failure = s_.engine.from_upstream_error(res.error());
    out.upstream_failure = res.error().kind;
  } else if (s.parser.failed()) {
    out.failure = bad_gateway(fmt::format("the engine's answer is not an event stream (a line longer than {} bytes)",
                                          kMaxEngineEventLine));
    if (options_.on_engine_failure) options_.on_engine_failure("the engine's stream is not server-sent events");
  } else if (out.status != 200) {
    note_engine_error(out, out.status, s.error_body);
    out.failure = s_.engine.from_engine_answer(out.status, s.error_body);
  } else if (s.parse_error && !cancel_.cancelled()) {
    rescue_stream(s);
  } else if (out.context_filled) {
    // Ended like a reply max_tokens cut: the finish chunk, then [DONE] (sent at commit).
    for (auto& c : s.finish.flush()) s.held.push_back(std::move(c));
    s.held.push_back({length_finish_chunk(s.chunk_id, s.model, util::unix_seconds_now()), std::string()});
    out.reply.set_finish_reason("length");
    out.saw_done = true;
    s_.metrics.add("context_filled_total");
  } else if (!out.saw_done && !out.saw_error_event && !cancel_.cancelled()) {
    // The engine's stream ended early (crash, broken connection): say so in-stream.
    out.failure = bad_gateway(s.bad_events > 0 ? fmt::format("the engine's stream ended before completion ({} events "
                                                             "were not JSON and were dropped)",
                                                             s.bad_events)
                                               : std::string("the engine's stream ended before completion"));
    if (options_.on_engine_failure) options_.on_engine_failure("the engine's stream ended before completion");
  }
  if (!out.context_filled) {
    for (auto& c : s.finish.flush()) s.held.push_back(std::move(c));
  }
  if (s.finish.rewrote()) out.reply.set_finish_reason("length");
  for (const auto& c : s.held) {
    if (!emit(c)) break;
  }
}

void Turn::rescue_stream(StreamState& s) {
  SendOutcome& out = s.out;
  auto rescued = rescue(*s.parse_error, out.reply);
  if (!rescued.ok()) {
    s_.metrics.add("rescues_total{outcome=\"failed\"}");
    out.failure = ApiError{.status = 500,
                           .type = "server_error",
                           .message = *s.parse_error + " (rescue failed: " + rescued.error().message() + ")",
                           .code = "output_parse_error"};
    return;
  }
  const std::string model = model_name();
  for (const json& chunk :
       rescued_chunks(*rescued, out.reply.content(), s.chunk_id, model, util::unix_seconds_now(), in_.include_usage)) {
    out_.kvgate_chunk(chunk);
  }
  out.reply = ReplyAccumulator();
  out.reply.set_response(rescued_response(*rescued, model, util::unix_seconds_now()));
  out.reply.set_usage(rescued->usage);
  out.rescued = true;
  out.saw_done = true;
  s.held.clear();
}

}  // namespace kvgate::gateway
