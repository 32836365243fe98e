// The Anthropic Messages and OpenAI Responses routes, the token counts both APIs offer, the
// model listing both clients read, and HEAD / (Gateway; routes in gateway.cc).
#include <chrono>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "gateway/chat_completions.h"
#include "gateway/chat_request.h"
#include "gateway/context_summary.h"
#include "gateway/gateway.h"
#include "gateway/json_headers.h"
#include "gateway/messages_api.h"
#include "upstream/model_id.h"
#include "gateway/request_checks.h"
#include "gateway/responses_api.h"
#include "gateway/turn_request.h"
#include "util/json.h"
#include "wire/anthropic_reply.h"
#include "wire/anthropic_request.h"
#include "wire/responses_reply.h"
#include "wire/responses_request.h"

namespace kvgate::gateway {

using nlohmann::json;

namespace {

ApiError bad_request_of(const wire::WireError& e) {
  ApiError a = bad_request(e.message, e.param.empty() ? std::nullopt : std::optional<std::string>(e.param));
  a.status = e.status;
  a.type = e.type;
  return a;
}


// One model as both OpenAI's and Anthropic's clients read it (each ignores the other's fields).
// `created` (OpenAI) and `created_at` (Anthropic) are when this kvgate started serving it.
// `context`: the tokens one conversation may hold (0: unknown, not listed), under vLLM's name
// for it (kvgate run reads it to tell an agent its window).
json model_entry(const std::string& id, uint64_t context) {
  static const auto started =
      std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now());
  json entry = {{"id", id},
                {"object", "model"},
                {"created", started.time_since_epoch().count()},
                {"owned_by", "kvgate"},
                {"type", "model"},
                {"display_name", id},
                {"created_at", fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", started)}};
  if (context > 0) entry["max_model_len"] = context;
  return entry;
}

}  // namespace

RelayOptions Gateway::relay_options() const {
  return {.head_grace = options_.stream_head_grace, .keepalive = options_.keepalive};
}

void Gateway::messages(const HttpRequest& request, ResponseWriter& writer) {
  std::string model;
  auto input = MessagesAdapter::input(request, caller_scope(request).value_or(Session::kOpenScope), model);
  MessagesAdapter adapter(writer, relay_options(), answer_model(model, options_.model_name));
  if (!input.ok()) return refuse_turn("messages", bad_request_of(input.error()), adapter);
  run_turn(std::move(*input), adapter);
}

ApiResult<uint64_t> Gateway::count_prompt(json body, std::string_view tools_text, ResponseWriter& writer) {
  KV_ASSIGN_OR_RETURN(PreparedChat prepared, prepare_chat(std::move(body), request_limits()));
  json& chat = prepared.request.body;
  stabilise(chat, options_.thinking, options_.stabiliser);
  KV_TRY(engine_.wait_for_engine([&writer] { return writer.client_gone(); }));
  // Counted as a turn sends it (Turn::restore, Turn::budget).
  mark_template_kwargs(chat);
  chat["messages"] = upstream_view(std::move(chat["messages"]), chat);
  const std::string tools = tools_as_written(tools_text, chat);
  auto count = tokens_.count(chat, std::string_view(tools));
  if (!count.ok()) {
    if (is_count_time_limit(count.error())) return request_too_large(count.error().message());
    return bad_gateway("counting the prompt's tokens failed: " + count.error().message());
  }
  return count->tokens;
}

void Gateway::count_message_tokens(const HttpRequest& request, ResponseWriter& writer) {
  RequestRecord rec{.route = "messages_count_tokens"};
  auto fail = [&](const wire::WireError& e, std::optional<int> retry_after = std::nullopt) {
    rec.status = e.status;
    rec.error_kind = "bad_request";
    metrics_.record(rec);
    send_anthropic_error(writer, e, retry_after);
  };
  auto body = parse_client_json_body(request.body);
  if (!body.ok()) return fail(anthropic_error_of(body.error()));
  auto chat = wire::count_tokens_to_chat(*body);
  if (!chat.ok()) return fail(chat.error());
  auto tokens = count_prompt(std::move(chat->chat), chat->tools_text, writer);
  if (!tokens.ok()) return fail(anthropic_error_of(tokens.error()), tokens.error().retry_after_s);
  metrics_.record(rec);
  writer.send(200, kJsonHeaders, util::json_text(wire::count_tokens_answer(static_cast<int64_t>(*tokens))));
}

// The stored conversation a Responses request continues (empty without previous_response_id).
ApiResult<json> Gateway::previous_messages(const wire::ClientJson& body, const std::string& scope) {
  if (!body.is_object()) return json::array();
  auto prev = body.find("previous_response_id");
  if (prev == body.end() || prev->is_null()) return json::array();
  if (!prev->is_string()) return bad_request("previous_response_id must be a string", "previous_response_id");
  const std::string id = prev->get<std::string>();
  KV_TRY(check_client_id(id, "previous_response_id"));
  auto stored = responses_->history(id, scope);
  if (!stored.ok()) {
    return bad_request(stored.error().message(), "previous_response_id", "previous_response_unavailable");
  }
  if (!*stored) {
    ApiError e = bad_request(fmt::format("Previous response with id '{}' not found.", id.substr(0, 200)),
                             "previous_response_id", "previous_response_not_found");
    return e;
  }
  return std::move(**stored);
}

ApiResult<wire::ResponsesConversion> Gateway::responses_request(const HttpRequest& request,
                                                                const std::string& scope) {
  KV_ASSIGN_OR_RETURN(wire::ClientJson body, parse_client_json_body(request.body));
  KV_ASSIGN_OR_RETURN(json previous, previous_messages(body, scope));
  auto conv = wire::responses_to_chat(body, previous);
  if (!conv.ok()) return bad_request_of(conv.error());
  log_ignored("responses", conv->ignored);
  if (conv->carried_summary) {
    conv->history.insert(conv->history.begin(), summary_message(*conv->carried_summary));
    put_carried_summary(conv->chat, *conv->carried_summary);
  }
  return std::move(*conv);
}

void Gateway::responses(const HttpRequest& request, ResponseWriter& writer) {
  const std::string scope = caller_scope(request).value_or(Session::kOpenScope);
  auto conv = responses_request(request, scope);
  if (!conv.ok()) {
    ChatCompletionsAdapter plain(writer, relay_options());
    return refuse_turn("responses", conv.error(), plain);
  }
  conv->model = answer_model(conv->model, options_.model_name);
  ResponsesAdapter adapter(writer, relay_options(), std::move(*conv));
  if (adapter.conversion().store) {
    adapter.on_final([&](const wire::ClientJson& response) {
      // Only what this request added; the rest is the previous response's (response_store.h).
      // A compaction (carried in, or written for this answer) replaced what came before: the
      // stored conversation starts with its summary and continues from nothing earlier.
      const auto& c = adapter.conversion();
      const auto& context = adapter.context();
      const bool compacted = context && context->summary;
      json messages = json::array();
      if (compacted) messages.push_back(summary_message(*context->summary));
      for (size_t i = compacted ? c.history.size() : c.previous_count; i < c.history.size(); ++i) {
        messages.push_back(c.history[i]);
      }
      for (auto& m : wire::output_to_chat_messages(response)) messages.push_back(std::move(m));
      const bool fresh = compacted || c.carried_summary.has_value();
      responses_->put(adapter.id(), {.scope = scope,
                                     .created = adapter.created_at(),
                                     .response = util::json_text(response),
                                     .messages = util::json_text(messages),
                                     .parent = fresh ? "" : c.previous_response_id.value_or("")});
      if (options_.on_response_stored) options_.on_response_stored(adapter.id());
    });
  }
  run_turn(adapter.input(request, scope), adapter);
}

void Gateway::compact_responses(const HttpRequest& request, ResponseWriter& writer) {
  const std::string scope = caller_scope(request).value_or(Session::kOpenScope);
  auto conv = responses_request(request, scope);
  if (!conv.ok()) {
    ChatCompletionsAdapter plain(writer, relay_options());
    return refuse_turn("responses_compact", conv.error(), plain);
  }
  conv->model = answer_model(conv->model, options_.model_name);
  conv->stream = false;
  conv->chat.erase("stream");
  conv->chat.erase("stream_options");
  ResponsesAdapter adapter(writer, relay_options(), std::move(*conv), ResponsesAdapter::Mode::kCompact);
  TurnInput in = adapter.input(request, scope);
  in.api = "responses_compact";
  in.edits = {.compact = wire::CompactEdit{.trigger_tokens = 0, .pause = true}, .requested = true};
  run_turn(std::move(in), adapter);
}

void Gateway::response_input_tokens(const HttpRequest& request, ResponseWriter& writer) {
  RequestRecord rec{.route = "responses_input_tokens"};
  auto conv = responses_request(request, caller_scope(request).value_or(Session::kOpenScope));
  auto tokens =
      conv.ok() ? count_prompt(std::move(conv->chat), conv->tools_text, writer) : ApiResult<uint64_t>(conv.error());
  if (!tokens.ok()) {
    rec.status = tokens.error().status;
    rec.error_kind = "bad_request";
    metrics_.record(rec);
    return send_error(writer, tokens.error());
  }
  metrics_.record(rec);
  send_json(writer, 200, json(wire::input_tokens_answer(static_cast<int64_t>(*tokens))));
}

void Gateway::get_response(const HttpRequest& request, ResponseWriter& writer) {
  const std::string id = request.path.substr(std::string_view("/v1/responses/").size());
  auto stored = responses_->get(id, caller_scope(request).value_or(Session::kOpenScope));
  if (!stored) {
    ApiError e = not_found(fmt::format("Response with id '{}' not found.", id.substr(0, 200)));
    e.type = "invalid_request_error";  // as OpenAI's API answers it
    return send_error(writer, e);
  }
  writer.send(200, kJsonHeaders, stored->response);
}

void Gateway::models(const HttpRequest& request, ResponseWriter& writer) {
  const std::string served = listed_model(options_.model_name);
  constexpr std::string_view kOne = "/v1/models/";
  if (request.path.size() > kOne.size() && request.path.starts_with(kOne)) {
    // Any name is the one model served: a client asking for the one it was configured with
    // gets it under that name. A path that is not one name ("../../props") names nothing.
    const std::string id = request.path.substr(kOne.size());
    if (id.find('/') != std::string::npos || id == "." || id == "..") {
      return send_error(writer, not_found(fmt::format("no model {}", id.substr(0, 200))));
    }
    return send_json(writer, 200, model_entry(id, context_tokens()));
  }
  send_json(writer, 200,
            {{"object", "list"},
             {"data", json::array({model_entry(served, context_tokens())})},
             {"has_more", false},
             {"first_id", served},
             {"last_id", served}});
}

void Gateway::head_ok(const HttpRequest&, ResponseWriter& writer) { writer.send(200, kJsonHeaders, ""); }

}  // namespace kvgate::gateway
