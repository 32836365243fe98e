#include "testing/wire_support.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "testing/paths.h"
#include "wire/anthropic_request.h"
#include "wire/responses_request.h"

namespace kvgate::wire::testing {

std::vector<std::string> all_pointers(const ClientJson& value, const std::string& prefix) {
  std::vector<std::string> out;
  auto visit = [&](const std::string& key, const ClientJson& child) {
    const std::string p = prefix + "/" + key;
    out.push_back(p);
    for (std::string& q : all_pointers(child, p)) out.push_back(std::move(q));
  };
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) visit(key, child);
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) visit(std::to_string(i), value[i]);
  }
  return out;
}

size_t for_each_mutation(const ClientJson& valid, const std::function<void(const ClientJson&)>& convert) {
  const ClientJson values[] = {nullptr,
                               true,
                               3,
                               -1,
                               1.5,
                               "s",
                               ClientJson::array(),
                               ClientJson::object(),
                               ClientJson::array({1, "x"}),
                               ClientJson{{"type", "text"}}};
  size_t tried = 0;
  for (const std::string& pointer : all_pointers(valid)) {
    for (const ClientJson& v : values) {
      ClientJson changed = valid;
      changed[ClientJson::json_pointer(pointer)] = v;
      convert(changed);
      ++tried;
    }
  }
  return tried;
}

std::vector<Event> parse_events(const std::vector<std::string>& sse) {
  std::vector<Event> out;
  for (const std::string& s : sse) {
    const size_t data = s.find("\ndata: ");
    const bool framed = s.rfind("event: ", 0) == 0 && data != std::string::npos && s.size() >= 2 &&
                        s.compare(s.size() - 2, 2, "\n\n") == 0 && s.find('\n', data + 1) == s.size() - 2;
    EXPECT_TRUE(framed) << "not one SSE event: " << s;
    if (!framed) continue;
    Event e{s.substr(7, data - 7),
            ClientJson::parse(s.substr(data + 7, s.size() - 2 - data - 7), nullptr, false)};
    EXPECT_FALSE(e.data.is_discarded()) << s;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> event_names(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) out.push_back(e.name);
  return out;
}

namespace {

struct AnthropicState {
  ClientJson message;
  std::map<size_t, std::string> partial_json;
  int open = -1;  // the open block's index, -1 when none
  bool unparsed_input = false;
  bool delta_seen = false;
  bool stopped = false;
};

void anthropic_block_event(const Event& e, AnthropicState& s) {
  ClientJson& content = s.message["content"];
  if (e.name == "content_block_start") {
    EXPECT_EQ(s.open, -1) << "a block starts while block " << s.open << " is open";
    EXPECT_EQ(e.data["index"], content.size()) << "block indices must be 0, 1, 2, …";
    content.push_back(e.data["content_block"]);
    s.open = static_cast<int>(content.size()) - 1;
    return;
  }
  const size_t index = e.data["index"].get<size_t>();
  EXPECT_EQ(static_cast<int>(index), s.open) << e.name << " for a block that is not open";
  if (static_cast<int>(index) != s.open) return;
  ClientJson& block = content[index];
  if (e.name == "content_block_stop") {
    s.open = -1;
    if (block["type"] == "tool_use") {
      const std::string text = s.partial_json[index];
      block["input"] = text.empty() ? ClientJson::object() : ClientJson::parse(text, nullptr, false);
      if (block["input"].is_discarded()) {
        block["input"] = text;
        s.unparsed_input = true;
      }
    }
    return;
  }
  const ClientJson& delta = e.data["delta"];
  const std::string type = delta["type"];
  if (type == "text_delta") {
    EXPECT_EQ(block["type"], "text");
    block["text"] = block["text"].get<std::string>() + delta["text"].get<std::string>();
  } else if (type == "thinking_delta") {
    EXPECT_EQ(block["type"], "thinking");
    block["thinking"] = block["thinking"].get<std::string>() + delta["thinking"].get<std::string>();
  } else if (type == "input_json_delta") {
    EXPECT_EQ(block["type"], "tool_use");
    s.partial_json[index] += delta["partial_json"].get<std::string>();
  } else {
    ADD_FAILURE() << "unknown delta " << type;
  }
}

}  // namespace

ClientJson accumulate_anthropic(const std::vector<Event>& events) {
  AnthropicState s;
  bool started = false;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    EXPECT_EQ(e.data["type"], e.name) << "event name and type differ";
    EXPECT_FALSE(s.stopped) << e.name << " after message_stop";
    if (e.name == "ping") continue;
    if (e.name == "message_start") {
      EXPECT_FALSE(started) << "second message_start";
      EXPECT_EQ(i, 0u) << "message_start must come first";
      started = true;
      s.message = e.data["message"];
      continue;
    }
    EXPECT_TRUE(started) << e.name << " before message_start";
    if (e.name == "message_delta") {
      EXPECT_FALSE(s.delta_seen) << "second message_delta";
      EXPECT_EQ(s.open, -1) << "message_delta while block " << s.open << " is open";
      s.delta_seen = true;
      s.message["stop_reason"] = e.data["delta"]["stop_reason"];
      s.message["stop_sequence"] = e.data["delta"]["stop_sequence"];
      for (const auto& [key, value] : e.data["usage"].items()) s.message["usage"][key] = value;
    } else if (e.name == "message_stop") {
      EXPECT_TRUE(s.delta_seen) << "message_stop without message_delta";
      s.stopped = true;
    } else if (e.name.rfind("content_block_", 0) == 0) {
      EXPECT_FALSE(s.delta_seen) << e.name << " after message_delta";
      anthropic_block_event(e, s);
    } else {
      ADD_FAILURE() << "unknown event " << e.name;
    }
  }
  EXPECT_TRUE(s.stopped) << "no message_stop";
  if (s.unparsed_input) {
    EXPECT_EQ(s.message["stop_reason"], "max_tokens") << "a tool input that is not JSON in a complete reply";
  }
  return s.message;
}

namespace {

struct ResponsesState {
  ClientJson output = ClientJson::array();  // as the added/delta events build it
  ClientJson done = ClientJson::array();    // the items of output_item.done
  std::map<size_t, std::string> text;       // concatenated deltas per item
  int open = -1;
};

void responses_item_event(const Event& e, ResponsesState& s) {
  const ClientJson& d = e.data;
  if (e.name == "response.output_item.added") {
    EXPECT_EQ(s.open, -1) << "an item opens while item " << s.open << " is open";
    EXPECT_EQ(d["output_index"], s.output.size());
    EXPECT_EQ(d["item"]["status"], "in_progress");
    s.output.push_back(d["item"]);
    s.open = static_cast<int>(s.output.size()) - 1;
    return;
  }
  const size_t index = d["output_index"].get<size_t>();
  EXPECT_EQ(static_cast<int>(index), s.open) << e.name << " for an item that is not open";
  if (static_cast<int>(index) != s.open) return;
  const ClientJson& item = s.output[index];
  if (d.contains("item_id")) {
    EXPECT_EQ(d["item_id"], item["id"]) << e.name;
  }
  const std::string type = item["type"];
  if (e.name == "response.output_text.delta" || e.name == "response.reasoning_text.delta" ||
      e.name == "response.function_call_arguments.delta") {
    const char* expected = type == "message"     ? "response.output_text.delta"
                           : type == "reasoning" ? "response.reasoning_text.delta"
                                                 : "response.function_call_arguments.delta";
    EXPECT_EQ(e.name, expected);
    s.text[index] += d["delta"].get<std::string>();
  } else if (e.name == "response.output_text.done" || e.name == "response.reasoning_text.done") {
    EXPECT_EQ(d["text"], s.text[index]) << "done text differs from the deltas";
  } else if (e.name == "response.function_call_arguments.done") {
    EXPECT_EQ(d["arguments"], s.text[index]) << "done arguments differ from the deltas";
  } else if (e.name == "response.content_part.added" || e.name == "response.content_part.done") {
    EXPECT_EQ(d["content_index"], 0);
    if (e.name == "response.content_part.done") {
      EXPECT_EQ(d["part"]["text"], s.text[index]);
    }
  } else if (e.name == "response.output_item.done") {
    EXPECT_EQ(d["item"]["id"], item["id"]);
    EXPECT_NE(d["item"]["status"], "in_progress");
    const ClientJson& done = d["item"];
    const std::string full = type == "function_call"   ? done["arguments"].get<std::string>()
                             : done["content"].empty() ? std::string()
                                                       : done["content"][0]["text"].get<std::string>();
    EXPECT_EQ(full, s.text[index]) << "the done item differs from the deltas";
    s.done.push_back(done);
    s.open = -1;
  } else {
    ADD_FAILURE() << "unknown event " << e.name;
  }
}

}  // namespace

ClientJson accumulate_responses(const std::vector<Event>& events) {
  ResponsesState s;
  ClientJson last;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    EXPECT_EQ(e.data["type"], e.name);
    EXPECT_EQ(e.data["sequence_number"], i) << "sequence numbers must count 0, 1, 2, …";
    EXPECT_TRUE(last.is_null()) << e.name << " after the terminal event";
    if (i < 2) {
      EXPECT_EQ(e.name, i == 0 ? "response.created" : "response.in_progress");
    }
    if (e.name == "response.created" || e.name == "response.in_progress") {
      EXPECT_LT(i, 2u);
      EXPECT_EQ(e.data["response"]["status"], "in_progress");
    } else if (e.name == "response.completed" || e.name == "response.incomplete" ||
               e.name == "response.failed") {
      last = e.data["response"];
      EXPECT_EQ(last["status"], e.name.substr(9));
      if (e.name != "response.failed") {
        EXPECT_EQ(s.open, -1) << "the response ends with an item open";
        EXPECT_EQ(last["output"], s.done) << "the final output differs from the done items";
      }
    } else {
      responses_item_event(e, s);
    }
  }
  EXPECT_FALSE(last.is_null()) << "no terminal event";
  return last;
}

ClientJson calls_in_id_order(ClientJson blocks) {
  std::vector<ClientJson> calls;
  ClientJson out = ClientJson::array();
  for (ClientJson& b : blocks) {
    if (b["type"] == "function_call") {
      b.erase("id");
      b.erase("status");  // the last one to close is the one cut at the token limit
      calls.push_back(std::move(b));
    } else if (b["type"] == "tool_use") {
      calls.push_back(std::move(b));
    } else {
      out.push_back(std::move(b));
    }
  }
  auto key = [](const ClientJson& b) { return b.contains("call_id") ? b["call_id"] : b["id"]; };
  std::sort(calls.begin(), calls.end(),
            [&](const ClientJson& a, const ClientJson& b) { return key(a) < key(b); });
  for (ClientJson& c : calls) out.push_back(std::move(c));
  return out;
}

std::map<std::string, nlohmann::json> recorded_fixtures() {
  std::map<std::string, nlohmann::json> out;
  const std::filesystem::path dir = std::filesystem::path(kvgate::testing::source_dir()) / "tests" / "fixtures" / "wire";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << entry.path();
    out[entry.path().stem().string()] = std::move(j);
  }
  EXPECT_FALSE(out.empty()) << "no fixtures in " << dir;
  return out;
}

nlohmann::json agent_request_messages(const std::string& cli, const std::string& name) {
  nlohmann::json chat = agent_request_chat(cli, name);
  return chat.contains("messages") ? chat["messages"] : nlohmann::json::array();
}

nlohmann::json agent_request_chat(const std::string& cli, const std::string& name) {
  const std::filesystem::path path =
      std::filesystem::path(kvgate::testing::source_dir()) / "tests" / "fixtures" / "agents" / cli / (name + ".json");
  std::ifstream in(path);
  const ClientJson record = ClientJson::parse(in, nullptr, false);
  if (record.is_discarded() || !record.contains("request")) {
    ADD_FAILURE() << "no request in " << path;
    return nlohmann::json::array();
  }
  const ClientJson& body = record["request"]["body"];
  if (cli == "claude") {
    auto chat = messages_to_chat(body);
    if (chat.ok()) return chat->chat;
    ADD_FAILURE() << path << ": " << chat.error().message;
  } else if (cli == "codex") {
    auto chat = responses_to_chat(body, nlohmann::json::array());
    if (chat.ok()) return chat->chat;
    ADD_FAILURE() << path << ": " << chat.error().message;
  } else {
    return nlohmann::json::parse(body.dump());
  }
  return nlohmann::json::object();
}

namespace {

using nlohmann::json;

std::vector<std::string> random_pieces(const std::string& text, std::mt19937& rng) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t n = std::uniform_int_distribution<size_t>(0, 6)(rng);
    // Pieces end at character boundaries, as the engine sends them.
    size_t end = std::min(text.size(), at + n);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    out.push_back(text.substr(at, end - at));
    at = end;
  }
  return out;
}

json chunk(const std::string& id, json delta, json finish = nullptr) {
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", 1700000000},
          {"model", "m"},
          {"choices", {{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}}}}};
}

json usage_json(const ChatUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json timings_json(const ChatUsage& u) {
  return {{"cache_n", u.cached_tokens},
          {"prompt_n", u.prompt_tokens - u.cached_tokens},
          {"predicted_n", u.completion_tokens}};
}

}  // namespace

json chat_response(const ReplySpec& spec) {
  json message = {{"role", "assistant"}, {"content", spec.text}};
  if (!spec.reasoning.empty()) message["reasoning_content"] = spec.reasoning;
  if (!spec.calls.empty()) {
    json calls = json::array();
    for (const ToolCall& c : spec.calls) {
      calls.push_back(
          {{"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}, {"id", c.id}});
    }
    message["tool_calls"] = std::move(calls);
  }
  return {{"id", spec.id},
          {"object", "chat.completion"},
          {"created", 1700000000},
          {"model", "m"},
          {"choices", {{{"index", 0}, {"message", std::move(message)}, {"finish_reason", spec.finish}}}},
          {"usage", usage_json(spec.usage)},
          {"timings", timings_json(spec.usage)}};
}

std::vector<json> chunks_for(const ReplySpec& spec, std::mt19937& rng, const ChunkOptions& options) {
  std::vector<json> out;
  out.push_back(chunk(spec.id, {{"role", "assistant"}, {"content", nullptr}}));
  auto noise = [&] {
    if (!options.noise || std::uniform_int_distribution<int>(0, 3)(rng) != 0) return;
    json c = chunk(spec.id, json::object());
    c["unexpected"] = {{"x", 1}};
    out.push_back(std::move(c));
  };
  for (const std::string& p : random_pieces(spec.reasoning, rng)) {
    out.push_back(chunk(spec.id, {{"reasoning_content", p}}));
    noise();
  }
  for (const std::string& p : random_pieces(spec.text, rng)) {
    out.push_back(chunk(spec.id, {{"content", p}}));
    noise();
  }
  // Per call: its pieces in order, the first carrying id and name.
  std::vector<std::vector<json>> per_call;
  for (size_t i = 0; i < spec.calls.size(); ++i) {
    const ToolCall& c = spec.calls[i];
    std::vector<json> pieces;
    std::vector<std::string> args = random_pieces(c.arguments, rng);
    if (args.empty()) args.push_back("");
    for (size_t k = 0; k < args.size(); ++k) {
      json call = {{"index", i}, {"function", {{"arguments", args[k]}}}};
      if (k == 0) {
        call["id"] = c.id;
        call["type"] = "function";
        call["function"]["name"] = c.name;
      }
      pieces.push_back(chunk(spec.id, {{"tool_calls", {call}}}));
    }
    per_call.push_back(std::move(pieces));
  }
  std::vector<size_t> next(per_call.size(), 0);
  for (size_t remaining = spec.calls.size(), current = 0; remaining > 0;) {
    if (options.interleave_calls) {
      current = std::uniform_int_distribution<size_t>(0, per_call.size() - 1)(rng);
    }
    if (next[current] == per_call[current].size()) {
      if (!options.interleave_calls) ++current;
      continue;
    }
    out.push_back(per_call[current][next[current]++]);
    if (next[current] == per_call[current].size()) --remaining;
    noise();
  }
  if (!options.omit_finish) out.push_back(chunk(spec.id, json::object(), spec.finish));
  if (!options.omit_usage) {
    json u = options.usage_in_finish && !options.omit_finish ? out.back() : chunk(spec.id, json::object());
    if (!options.usage_in_finish || options.omit_finish) u["choices"] = json::array();
    u["usage"] = usage_json(spec.usage);
    u["timings"] = timings_json(spec.usage);
    if (options.usage_in_finish && !options.omit_finish) {
      out.back() = std::move(u);
    } else {
      out.push_back(std::move(u));
    }
  }
  return out;
}

ReplySpec random_reply(std::mt19937& rng) {
  static const char* const kWords[] = {"the", "river", "flows", "é", "日本", "\"q\"",
                                       "{",   "}",     "\n",    " ", "x"};
  auto words = [&](int max) {
    std::string s;
    const int n = std::uniform_int_distribution<int>(0, max)(rng);
    for (int i = 0; i < n; ++i)
      s += kWords[std::uniform_int_distribution<size_t>(0, std::size(kWords) - 1)(rng)];
    return s;
  };
  ReplySpec spec;
  spec.id = "chatcmpl-r" + std::to_string(rng() % 100000);
  spec.reasoning = words(8);
  spec.text = words(12);
  const int calls = std::uniform_int_distribution<int>(0, 3)(rng);
  for (int i = 0; i < calls; ++i) {
    json args = json::object();
    const int keys = std::uniform_int_distribution<int>(0, 3)(rng);
    for (int k = 0; k < keys; ++k) args["k" + std::to_string(k)] = words(4);
    spec.calls.push_back({.id = "call_" + std::to_string(i) + "_" + std::to_string(rng() % 1000),
                          .name = "tool_" + std::to_string(i),
                          .arguments = args.dump()});
  }
  const int finish = std::uniform_int_distribution<int>(0, 2)(rng);
  spec.finish = !spec.calls.empty() && finish != 2 ? "tool_calls" : finish == 2 ? "length" : "stop";
  spec.usage.completion_tokens = static_cast<int64_t>(rng() % 500);
  return spec;
}

}  // namespace kvgate::wire::testing
