#include "gateway/responses_api.h"

#include "gateway/chat_completions.h"
#include "util/json.h"
#include "util/random_id.h"
#include "util/time.h"
#include "wire/context_edits.h"
#include "wire/responses_reply.h"

namespace kvgate::gateway {

using http::HeaderList;
using http::HttpRequest;
using http::ResponseWriter;

using nlohmann::json;

ResponsesAdapter::ResponsesAdapter(ResponseWriter& writer, RelayOptions relay,
                                   wire::ResponsesConversion conversion, Mode mode)
    : EventOutput(writer, std::move(relay)),
      conversion_(std::move(conversion)),
      id_(util::random_id("resp_")),
      created_at_(util::unix_seconds_now()),
      mode_(mode) {}

TurnInput ResponsesAdapter::input(const HttpRequest& request, std::string scope) const {
  TurnInput in;
  in.name = header_conversation(request.header("x-session-id"));
  if (!in.name && conversion_.session_key) in.name = cache_key_conversation(*conversion_.session_key);
  in.stream = conversion_.stream;
  in.include_usage = true;  // the final response carries the usage
  in.body = conversion_.chat;
  in.tools_text = conversion_.tools_text;
  in.scope = std::move(scope);
  in.api = "responses";
  in.edits = conversion_.edits;
  return in;
}

wire::ClientJson ResponsesAdapter::compaction_item() const {
  return wire::compaction_item(id_, wire::compaction_token(*context_->summary));
}

void ResponsesAdapter::answer(const json& response, std::string_view) {
  wire::ClientJson answer = wire::chat_to_response(response, conversion_, id_, created_at_);
  const bool summarised = context_ && context_->summary;
  if (mode_ == Mode::kCompact) {
    if (!summarised) {
      return send_error(
          ApiError{.status = 503,
                   .type = "server_error",
                   .message = "the conversation could not be compacted: the engine could not count it",
                   .code = std::string("compaction_unavailable")});
    }
    wire::ClientJson compacted = {{"id", id_},
                                  {"object", "response.compaction"},
                                  {"created_at", created_at_},
                                  {"output", wire::ClientJson::array({compaction_item()})},
                                  {"usage", answer["usage"]}};
    writer_.send(200, {{"Content-Type", "application/json"}}, util::json_text(compacted));
    return;
  }
  if (summarised) {
    answer["output"].insert(answer["output"].begin(), compaction_item());
  }
  if (keep_) keep_(answer);
  writer_.send(200, {{"Content-Type", "application/json"}}, util::json_text(answer));
}

std::vector<std::string> ResponsesAdapter::start_events() {
  if (!stream_) stream_.emplace(conversion_, id_, created_at_);
  std::vector<std::string> events = stream_->start();
  if (context_ && context_->summary) {
    for (std::string& e : stream_->compaction(wire::compaction_token(*context_->summary)))
      events.push_back(std::move(e));
  }
  return events;
}

std::vector<std::string> ResponsesAdapter::chunk_events(const json& chunk) {
  return stream_->on_chunk(chunk);
}

std::vector<std::string> ResponsesAdapter::finish_events() {
  auto events = stream_->finish();
  if (keep_) keep_(stream_->response());
  return events;
}

std::vector<std::string> ResponsesAdapter::error_events(const ApiError& error) {
  return stream_->failed(wire::WireError{.status = error.status,
                                         .type = error.type,
                                         .message = error.message,
                                         .param = error.param.value_or("")});
}

void ResponsesAdapter::send_error(const ApiError& error) { send_api_error(writer_, error); }

}  // namespace kvgate::gateway
