#include "wire/chat_reply.h"

namespace kvgate::wire {

using nlohmann::json;

namespace {

int64_t count(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return 0;
  const double v = it->get<double>();
  if (!(v > 0)) return 0;
  return v < 1e15 ? static_cast<int64_t>(v) : int64_t{1'000'000'000'000'000};
}

std::string text_of(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const json* object_at(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? &*it : nullptr;
}

const json* first_choice(const json& body) {
  auto it = body.find("choices");
  if (it == body.end() || !it->is_array() || it->empty() || !(*it)[0].is_object()) return nullptr;
  return &(*it)[0];
}

std::optional<std::string> finish_of(const json& choice) {
  auto it = choice.find("finish_reason");
  if (it == choice.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace

std::optional<ChatUsage> read_usage(const json& body) {
  if (!body.is_object()) return std::nullopt;
  const json* usage = object_at(body, "usage");
  if (usage == nullptr) return std::nullopt;
  ChatUsage u;
  u.prompt_tokens = count(*usage, "prompt_tokens");
  u.completion_tokens = count(*usage, "completion_tokens");
  if (const json* d = object_at(*usage, "prompt_tokens_details"))
    u.cached_tokens = count(*d, "cached_tokens");
  if (const json* d = object_at(*usage, "completion_tokens_details"))
    u.reasoning_tokens = count(*d, "reasoning_tokens");
  if (const json* timings = object_at(body, "timings"); timings != nullptr && timings->contains("cache_n")) {
    u.cached_tokens = count(*timings, "cache_n");
  }
  if (u.cached_tokens > u.prompt_tokens) u.cached_tokens = u.prompt_tokens;
  return u;
}

std::string stop_word_of(const json& body) {
  if (!body.is_object()) return {};
  const json* verbose = object_at(body, "__verbose");
  if (verbose == nullptr || text_of(*verbose, "stop_type") != "word") return {};
  return text_of(*verbose, "stopping_word");
}

ChatReply read_reply(const json& chat_response) {
  ChatReply r;
  if (!chat_response.is_object()) return r;
  r.id = text_of(chat_response, "id");
  r.stop_word = stop_word_of(chat_response);
  r.usage = read_usage(chat_response);
  const json* choice = first_choice(chat_response);
  if (choice == nullptr) return r;
  r.finish_reason = finish_of(*choice).value_or("");
  const json* message = object_at(*choice, "message");
  if (message == nullptr) return r;
  r.reasoning = text_of(*message, "reasoning_content");
  r.text = text_of(*message, "content");
  auto calls = message->find("tool_calls");
  if (calls == message->end() || !calls->is_array()) return r;
  for (const json& call : *calls) {
    if (!call.is_object() || r.tool_calls.size() >= kMaxToolCalls) continue;
    ToolCall c;
    c.id = text_of(call, "id");
    if (const json* fn = object_at(call, "function")) {
      c.name = text_of(*fn, "name");
      c.arguments = text_of(*fn, "arguments");
    }
    if (c.id.empty()) c.id = fallback_call_id(r.id, r.tool_calls.size());
    r.tool_calls.push_back(std::move(c));
  }
  return r;
}

ChunkPieces read_chunk(const json& chunk) {
  ChunkPieces p;
  if (!chunk.is_object()) return p;
  p.id = text_of(chunk, "id");
  p.usage = read_usage(chunk);
  p.stop_word = stop_word_of(chunk);
  const json* choice = first_choice(chunk);
  if (choice == nullptr) return p;
  p.finish_reason = finish_of(*choice);
  const json* delta = object_at(*choice, "delta");
  if (delta == nullptr) return p;
  p.reasoning = text_of(*delta, "reasoning_content");
  p.text = text_of(*delta, "content");
  auto calls = delta->find("tool_calls");
  if (calls == delta->end() || !calls->is_array()) return p;
  for (size_t i = 0; i < calls->size(); ++i) {
    const json& call = (*calls)[i];
    if (!call.is_object()) continue;
    ToolCallPiece piece;
    piece.index = i;
    if (auto idx = call.find("index"); idx != call.end() && idx->is_number_integer()) {
      const int64_t v = idx->get<int64_t>();
      if (v < 0 || v >= static_cast<int64_t>(kMaxToolCalls)) continue;
      piece.index = static_cast<size_t>(v);
    }
    piece.id = text_of(call, "id");
    if (const json* fn = object_at(call, "function")) {
      piece.name = text_of(*fn, "name");
      piece.arguments = text_of(*fn, "arguments");
    }
    p.tool_calls.push_back(std::move(piece));
  }
  return p;
}

std::string fallback_call_id(std::string_view reply_id, size_t index) {
  return "call_" + id_stem(reply_id) + "_" + std::to_string(index);
}

std::string id_stem(std::string_view chat_id) {
  constexpr std::string_view kPrefix = "chatcmpl-";
  if (chat_id.substr(0, kPrefix.size()) == kPrefix) chat_id.remove_prefix(kPrefix.size());
  return std::string(chat_id);
}

}  // namespace kvgate::wire
