// Gateway: compaction — one helper for chat turns and the manual route
// (POST /kvgate/v1/sessions/ID/compact), and the engine-written summaries L2 asks for.
#include <fmt/format.h>

#include "gateway/chat_request.h"
#include "gateway/gateway.h"
#include "gateway/turn_budget.h"
#include "upstream/reply.h"
#include "util/json.h"
#include "util/log.h"
#include "util/time.h"

namespace kvgate::gateway {

using session::CompactionResult;
using session::SummarizeFn;
using session::build_view;
using session::compact;
using session::message_text;

using nlohmann::json;

namespace {

// Summaries are sampled with a fixed seed: the same history summarised again (a retried turn,
// a second kvgate in front of the same engine) gives the same summary and so the same prompt,
// which the engine may still hold.
constexpr int kSummarySeed = 20251205;

// A compaction as sessions list it and the store keeps it.
json compaction_event(const CompactionResult& r, const char* trigger, double ms, const json& summary_stats) {
  json ev = {{"level", r.level},
             {"trigger", trigger},
             {"tokens_before", r.tokens_before},
             {"tokens_after", r.tokens_after},
             {"duration_ms", ms},
             {"dropped_messages", r.dropped_messages},
             {"truncated_messages", r.truncated_messages}};
  if (!r.summary_source.empty()) ev["summary_source"] = r.summary_source;
  if (!r.summary_error.empty()) ev["summary_error"] = r.summary_error;
  if (r.summary_view_from > 0) ev["summary_view_from"] = r.summary_view_from;
  if (!summary_stats.empty()) ev["summary_request"] = summary_stats;
  return ev;
}

}  // namespace

ApiResult<json> Gateway::compact_conversation(Session& session, Conversation& conv, const json& body,
                                              const CompactionCall& call) {
  const auto t0 = std::chrono::steady_clock::now();
  auto count_view = [&](const json& view) -> Result<uint64_t> {
    KV_ASSIGN_OR_RETURN(TokenCount c, tokens_.count(body, upstream_view(view, body), call.tools_text));
    return c.tokens;
  };
  auto count_text = [&](const std::string& text) -> Result<uint64_t> { return tokens_.count_text(text); };
  json summary_stats = json::object();
  SummarizeFn summarize;
  if (options_.model_summaries) {
    summarize = [&](const Conversation& c, uint64_t until, uint64_t max_tokens) {
      // A conversation cut later than the session's is a view fitted to the context (its
      // oldest turns summarised extractively), not what the engine has cached.
      const bool fitted = c.first_kept() != conv.first_kept();
      return engine_summary(session, body, call, c, until, max_tokens, !fitted, summary_stats);
    };
  }
  session::CompactionOptions options = options_.compaction_options;
  // A summary request larger than the engine's context would be refused: the context as the
  // engine reports it when it was not given (an engine kvgate did not plan).
  if (options.summary_prompt_limit == 0) options.summary_prompt_limit = context_tokens();
  options.summaries = options.summaries && call.summaries;
  options.fit_tokens = call.fit;
  auto r = compact(conv, call.target, call.first_new, count_view, count_text, summarize, options);
  if (!r) return context_length_exceeded(r.error().message());
  conv = std::move(r->conversation);
  return record_compaction(session, compaction_event(*r, call.trigger, util::ms_since(t0), summary_stats));
}

json Gateway::record_compaction(const Session& session, json event) {
  event["ts"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  json logged = event;
  logged["session"] = session.id;
  util::log_event(util::LogLevel::kInfo, "compaction", std::move(logged));
  metrics_.add(fmt::format("compactions_total{{level=\"{}\",trigger=\"{}\"}}", event.value("level", ""),
                           event.value("trigger", "")));
  return event;
}

Result<std::string> Gateway::engine_summary(Session& session, const json& request_body,
                                            const CompactionCall& call, const Conversation& c, uint64_t until, uint64_t max_tokens,
                                            bool continuation, json& stats) {
  // The engine has the last view (and its reply) in this slot's cache: ask for the summary
  // as a continuation of exactly that, so only the instruction and the summary are computed.
  const bool last_view = continuation && !session.last_view.empty();
  json thinking_off = {{"chat_template_kwargs", {{"enable_thinking", false}}}};
  mark_template_kwargs(thinking_off);
  json messages = last_view ? session.last_view : upstream_view(build_view(c), thinking_off);
  if (last_view && c.length > session.last_request_messages &&
      session.last_request_messages >= c.first_kept()) {
    messages.push_back(c.at(session.last_request_messages).message);  // the reply the engine wrote
  }
  std::string before;
  if (until < c.length) {
    std::string t = message_text(c.at(until).message);
    before = t.substr(0, std::min<size_t>(t.size(), 80));
  }
  const uint64_t words = std::max<uint64_t>(40, max_tokens * 6 / 10);
  std::string instruction = !call.instructions.empty() ? std::string(call.instructions) : fmt::format(
      "Write a summary of the conversation above{} so that it can be continued without it: the task and its goal, "
      "decisions taken, files, commands, numbers and errors that matter, and what is still open. If a summary of "
      "earlier parts is above, fold it in. At most {} words, plain text, no preamble.",
      before.empty() ? std::string() : fmt::format(" before the message that begins \"{}\"", before), words);
  messages.push_back({{"role", "user"}, {"content", instruction}});
  json render = thinking_off;
  render["messages"] = messages;
  if (request_body.contains("tools")) render["tools"] = request_body["tools"];
  auto rendered = upstream_->call("POST", "/apply-template", util::json_text_with(render, {"tools", call.tools_text}),
                                  std::chrono::seconds(60));
  if (!rendered.ok()) return Error("summary: " + rendered.error().message);
  const UpstreamResponse& rr = *rendered;
  auto rj = json::parse(rr.body, nullptr, false);
  if (rr.status != 200 || rj.is_discarded() || !rj.contains("prompt")) {
    return Error(fmt::format("summary: the engine could not render the request ({})", rr.status));
  }
  // Not reusing the slot's cache when the turn may not (its slot could not be cleared of
  // another key's content: keep_slot_private).
  const auto cp = request_body.find("cache_prompt");
  const bool cache_prompt = cp == request_body.end() || !cp->is_boolean() || cp->get<bool>();
  // Streamed: a model can emit bytes that are not valid UTF-8, which makes the engine reject
  // a non-streamed answer as a whole; the stream delivers every piece.
  json completion = {{"prompt", rj["prompt"]},  {"n_predict", max_tokens}, {"id_slot", call.slot},
                     {"cache_prompt", cache_prompt}, {"temperature", 0.3}, {"seed", kSummarySeed},
                     {"return_progress", true}, {"stream", true}};
  // The client's own token constraints apply to the summary too.
  if (request_body.contains("logit_bias")) completion["logit_bias"] = request_body["logit_bias"];
  const auto t0 = std::chrono::steady_clock::now();
  std::string text;
  json last;
  json progress;
  std::string stream_error;
  const EventStreamEnd stream = stream_events(
      *upstream_, "/completion", util::json_text(completion),
      [&](const std::string& data) {
        auto j = json::parse(data, nullptr, false);
        if (j.is_discarded() || !j.is_object()) return;
        if (j.contains("content") && j["content"].is_string()) text += j["content"].get<std::string>();
        if (j.contains("prompt_progress") && j["prompt_progress"].is_object()) progress = j["prompt_progress"];
        if (j.contains("error") && j["error"].is_object()) stream_error = j["error"].value("message", "error");
        if (j.value("stop", false)) last = j;
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.summary_timeout));
  if (stream.failure) return Error("summary: " + stream.failure->message);
  if (stream.status != 200) {
    return Error(fmt::format("summary: the engine answered {}: {}", stream.status, stream.error_body.substr(0, 300)));
  }
  // How much of the summary prompt the engine had cached: from its prefill progress (the
  // final timings are missing when the engine rejected the end of the output).
  if (progress.is_object()) {
    stats = {{"prompt_tokens", progress.value("total", 0)}, {"cached_tokens", progress.value("cache", 0)}};
  }
  if (!stream_error.empty()) {
    stats["engine_error"] = stream_error;
    if (text.empty()) return Error("summary: " + stream_error);
  }
  if (auto end = text.find("</think>"); end != std::string::npos) text = text.substr(end + 8);
  while (!text.empty() && (text.front() == '\n' || text.front() == ' ')) text.erase(0, 1);
  if (const CompletionFigures f = completion_figures(last); f.known) {
    stats["prompt_tokens"] = f.prompt_tokens;
    stats["cached_tokens"] = f.cached_tokens;
    stats["generated_tokens"] = f.generated_tokens;
  }
  stats["ms"] = util::ms_since(t0);
  return text;
}

void Gateway::compact_session(const HttpRequest& request, ResponseWriter& writer) {
  // POST /kvgate/v1/sessions/ID/compact  {"target_tokens": N}   (default: the low watermark)
  const std::string prefix = "/kvgate/v1/sessions/";
  const std::string suffix = "/compact";
  if (request.path.size() <= prefix.size() + suffix.size() ||
      request.path.compare(request.path.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return send_error(writer, not_found(fmt::format("no route for POST {}", request.path)));
  }
  const std::string id = request.path.substr(prefix.size(), request.path.size() - prefix.size() - suffix.size());
  auto session = sessions_.get(id, caller_scope(request).value_or(""));
  if (!session) return send_error(writer, not_found(fmt::format("no session '{}'", id)));
  json args = json::object();
  if (!request.body.empty()) {
    auto parsed = parse_json_body(request.body);
    if (!parsed.ok()) return send_error(writer, parsed.error());
    args = std::move(*parsed);
    if (!args.is_object()) return send_error(writer, bad_request("request body must be a JSON object"));
  }
  RequestRecord rec{.route = "compact"};
  // The engine writes the summary: a place like any request's.
  auto ticket = admit(session->id, [&writer] { return writer.client_gone(); }, rec);
  if (!ticket.ok()) {
    if (!client_left(ticket.error())) send_error(writer, ticket.error());
    return;
  }
  std::unique_lock turn(session->turn);
  Conversation& conv = session->conversation;
  if (conv.length == 0) return send_error(writer, bad_request("the session has no conversation yet"));
  uint64_t target = watermarks(context_tokens(), options_.high_watermark_tokens, options_.high_watermark_fraction,
                               options_.low_watermark_fraction)
                        .low;
  if (args.contains("target_tokens")) {
    if (!args["target_tokens"].is_number_unsigned()) {
      return send_error(writer, bad_request("target_tokens must be a positive integer", "target_tokens"));
    }
    target = args["target_tokens"];
  }
  json body = {{"chat_template_kwargs", {{"enable_thinking", false}}}};
  mark_template_kwargs(body);
  const int slot = session->slot < 0 ? 0 : session->slot;
  if (!keep_slot_private(slot, session->scope, false)) body["cache_prompt"] = false;
  auto event = compact_conversation(*session, conv, body,
                                    {.target = target, .first_new = conv.length, .trigger = "manual", .slot = slot});
  if (!event.ok()) return send_error(writer, event.error());
  {
    std::lock_guard lock(session->mu);
    session->compactions.push_back(*event);
    session->view_stats = Session::ViewStats::of(conv);
  }
  (void)persist(*session, {*event});
  send_json(writer, 200, *event);
}

}  // namespace kvgate::gateway
