#include "gateway/chat_completions.h"

#include "gateway/chat_request.h"
#include "gateway/gateway.h"
#include "gateway/json_headers.h"
#include "util/json.h"

namespace kvgate::gateway {

using http::HeaderList;
using http::HttpRequest;
using http::ResponseWriter;

using nlohmann::json;

namespace {

std::string data_event(const json& chunk) { return "data: " + util::json_text(chunk) + "\n\n"; }

}  // namespace

void send_api_error(ResponseWriter& writer, const ApiError& error) {
  HeaderList headers = kJsonHeaders;
  if (error.retry_after_s) headers.emplace_back("Retry-After", std::to_string(*error.retry_after_s));
  writer.send(error.status, headers, error.body());
}

ChatCompletionsAdapter::ChatCompletionsAdapter(ResponseWriter& writer, RelayOptions relay)
    : writer_(writer), relay_options_(std::move(relay)) {}

ChatCompletionsAdapter::~ChatCompletionsAdapter() = default;

ApiResult<TurnInput> ChatCompletionsAdapter::input(const HttpRequest& request, std::string scope) {
  KV_ASSIGN_OR_RETURN(json body, parse_json_body(request.body));
  TurnInput in;
  in.name = named_conversation(request.header("x-session-id"), body);
  const StreamFlags flags = stream_flags(body);
  in.stream = flags.stream;
  in.include_usage = flags.include_usage;
  // The client's own text of its tools (key order kept), looked up only when there are any.
  if (auto t = body.find("tools"); t != body.end() && t->is_array() && !t->empty()) {
    if (auto tools = util::member_text(request.body, "tools")) in.tools_text = *tools;
  }
  in.body = std::move(body);
  in.scope = std::move(scope);
  in.api = "chat";
  return in;
}

bool ChatCompletionsAdapter::client_gone() { return writer_.client_gone(); }

void ChatCompletionsAdapter::open_stream(CancelScope& cancel) {
  relay_ = std::make_unique<StreamRelay>(writer_, cancel, relay_options_);
}

bool ChatCompletionsAdapter::begin_stream() { return relay_->begin(); }

bool ChatCompletionsAdapter::engine_chunk(const json&, const std::string& raw) {
  answered_ = true;
  return relay_->write(raw);
}

bool ChatCompletionsAdapter::engine_error(const ApiError&, const std::string& raw) {
  answered_ = true;
  return relay_->write(raw);
}

bool ChatCompletionsAdapter::kvgate_chunk(const json& chunk) {
  answered_ = true;
  return relay_->write(data_event(chunk));
}

void ChatCompletionsAdapter::progress(std::string text) { relay_->set_progress(std::move(text)); }

void ChatCompletionsAdapter::end_stream(bool complete) {
  if (complete) relay_->write("data: [DONE]\n\n");
  relay_->finish();
}

void ChatCompletionsAdapter::answer(const json& response, std::string_view engine_text) {
  if (!engine_text.empty()) {
    writer_.send(200, kJsonHeaders, engine_text);
  } else {
    writer_.send(200, kJsonHeaders, util::json_text(response));
  }
}

void ChatCompletionsAdapter::fail(const ApiError& error) {
  if (relay_ && (relay_->started() || writer_.continues_stream())) {
    const std::string event = data_event(error.to_json());
    // Only the head and keep-alives went out: another engine may answer in this stream.
    if (!answered_ && engine_went_away(error) && writer_.hand_on(error.status, event)) return;
    relay_->write(event);
    return;
  }
  if (relay_) relay_->finish();
  send_api_error(writer_, error);
}

void Gateway::chat(const HttpRequest& request, ResponseWriter& writer) {
  ChatCompletionsAdapter adapter(writer, {.head_grace = options_.stream_head_grace, .keepalive = options_.keepalive});
  auto input = ChatCompletionsAdapter::input(request, caller_scope(request).value_or(Session::kOpenScope));
  if (!input.ok()) return refuse_turn("chat", input.error(), adapter);
  run_turn(std::move(*input), adapter);
}

void Gateway::refuse_turn(const std::string& api, const ApiError& error, TurnOutput& output) {
  RequestRecord rec{.route = api, .status = error.status, .error_kind = "bad_request"};
  metrics_.record(rec);
  output.fail(error);
}

}  // namespace kvgate::gateway
