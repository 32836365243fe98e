#include "bench/client_sim.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "session/session.h"
#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

constexpr std::string_view kClearedResult = "[Old tool result content cleared]";

constexpr std::string_view kSummaryInstruction =
    "Your task is to create a detailed summary of the conversation so far, paying close attention to the "
    "user's explicit requests and your previous actions. Include the files, commands and errors that "
    "matter, what was tried, and what remains to be done. Do not call any tools; answer with the summary "
    "only.";

constexpr std::string_view kContinuation =
    "This session is being continued from a previous conversation that ran out of context. The "
    "conversation is summarized below:\n";

json function_tool(std::string_view name, std::string_view description, std::string_view argument) {
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"description", description},
            {"parameters",
             {{"type", "object"},
              {"properties", {{argument, {{"type", "string"}}}}},
              {"required", json::array({argument})}}}}}};
}

TextKind pick_kind(Rng& rng, const TextMix& mix) {
  const double total = mix.prose + mix.code + mix.log + mix.chinese;
  double x = rng.unit() * (total > 0 ? total : 1);
  if (total <= 0 || (x -= mix.prose) < 0) return TextKind::kProse;
  if ((x -= mix.code) < 0) return TextKind::kCode;
  if ((x -= mix.log) < 0) return TextKind::kLog;
  return TextKind::kChinese;
}

bool mostly_chinese(const TextMix& mix) { return mix.chinese > mix.prose + mix.code + mix.log; }

std::string text_of(const json& message) {
  if (message.contains("content") && message["content"].is_string()) return message["content"];
  return {};
}

}  // namespace

ClientSim::ClientSim(ClientSpec spec, uint64_t seed, size_t client)
    : spec_(std::move(spec)), rng_(mix_seed(seed, client + 1)) {
  Rng shared(mix_seed(seed, 0));
  // One agent's clock starts somewhere in 2026; its clients run at the same time.
  clock_ms_ = 1'767'225'600'000 + static_cast<int64_t>(shared.below(300)) * 86'400'000 +
              static_cast<int64_t>(shared.below(86'400'000));
  const bool zh = mostly_chinese(spec_.mix);
  system_base_ = "You are a coding agent working in a repository. Follow the rules below.\n";
  const TextKind kind = zh ? TextKind::kChinese : TextKind::kProse;
  while (static_cast<double>(system_base_.size()) < static_cast<double>(spec_.system_tokens) * bytes_per_token(kind))
    system_base_ += "- " + make_text(shared, kind, 20) + "\n";
  if (spec_.tool_turns > 0) {
    tools_ = json::array({function_tool("read_file", "Read a file from the workspace", "path"),
                          function_tool("run_shell", "Run a shell command", "cmd"),
                          function_tool("search_logs", "Search service logs", "query"),
                          function_tool("fetch_url", "Fetch a web page as text", "url")});
  }
}

ClientTurn ClientSim::next(const std::optional<json>& reply) {
  ++turn_;
  clock_ms_ += static_cast<int64_t>(rng_.between(5'000, 90'000));
  if (turn_ == 1) return first_turn();
  if (summary_asked_) {
    summary_asked_ = false;
    if (reply) return continuation(text_of(*reply));
  }
  ClientTurn t;
  t.number = turn_;
  t.kind = "user";
  for (auto& e : history_) e.edited = e.reordered = false;
  size_t added = 0;
  if (reply) {
    take_reply(*reply, t);
    added = 1;
  } else {
    pending_calls_ = json::array();
    t.notes.push_back("the previous request failed: no reply to echo");
  }
  if (spec_.reorder_results) reorder_last_results(t);
  last_results_.clear();
  if (spec_.edit_every > 0 && turn_ % spec_.edit_every == 0) edit_earlier(t);
  if (spec_.summarise_every > 0 && turn_ % spec_.summarise_every == 0 && pending_calls_.empty()) {
    apply_window(t);
    finish(t, added);
    return summary_request(std::move(t));
  }
  if (!pending_calls_.empty()) {
    add_results(t);
    added += t.tool_results;
  } else {
    add_user_message();
    added += 1;
  }
  apply_window(t);
  t.asks_tool_call = !tools_.is_null() && rng_.chance(spec_.tool_turns);
  t.body = compose(t.asks_tool_call);
  finish(t, added);
  return t;
}

ClientTurn ClientSim::first_turn() {
  ClientTurn t;
  t.number = turn_;
  t.kind = "first";
  t.new_conversation = true;
  if (spec_.pasted_history > 0) {
    const auto target = static_cast<uint64_t>(spec_.pasted_history * static_cast<double>(spec_.context_tokens));
    uint64_t pasted = 0;
    while (pasted < target) {
      const uint64_t u = turn_growth(), a = rng_.between(60, 200);
      history_.push_back({{{"role", "user"}, {"content", user_text(u)}}});
      history_.push_back({{{"role", "assistant"}, {"content", make_text(rng_, TextKind::kProse, a)}}});
      pasted += u + a;
    }
    t.notes.push_back(fmt::format("pasted an earlier conversation of {} messages (~{} tokens)", history_.size(), pasted));
  }
  add_user_message();
  history_.front().env_block = true;
  apply_window(t);
  t.asks_tool_call = !tools_.is_null() && rng_.chance(spec_.tool_turns);
  t.body = compose(t.asks_tool_call);
  return t;
}

ClientTurn ClientSim::continuation(const std::string& summary) {
  ClientTurn t;
  t.number = turn_;
  t.kind = "continuation";
  t.new_conversation = true;
  t.carries_reply = !session::line_hashes(summary).empty();
  history_.clear();
  last_results_.clear();
  pending_calls_ = json::array();
  history_.push_back({{{"role", "user"},
                       {"content", std::string(kContinuation) + summary +
                                       "\nPlease continue the conversation from where we left it."}},
                      true});
  add_user_message();
  apply_window(t);
  t.notes.push_back(fmt::format("replaced its history with a summary of {} bytes", summary.size()));
  t.asks_tool_call = !tools_.is_null() && rng_.chance(spec_.tool_turns);
  t.body = compose(t.asks_tool_call);
  return t;
}

ClientTurn ClientSim::summary_request(ClientTurn t) {
  t.kind = "summary_request";
  summary_asked_ = true;
  const json instruction = json::array({{{"role", "user"}, {"content", kSummaryInstruction}}});
  t.body = compose(false, instruction, true);
  const size_t n = t.body["messages"].size();
  // The increment: the previous reply (finish() counted it) and the instruction.
  t.increment_from = std::min(t.increment_from.value_or(n - 1), n - 1);
  t.notes.push_back("asked for a summary of the conversation");
  return t;
}

void ClientSim::take_reply(const json& reply, ClientTurn& t) {
  json m = {{"role", "assistant"}, {"content", reply.contains("content") ? reply["content"] : json(nullptr)}};
  pending_calls_ = json::array();
  if (reply.contains("tool_calls") && reply["tool_calls"].is_array() && !reply["tool_calls"].empty()) {
    m["tool_calls"] = reply["tool_calls"];
    pending_calls_ = reply["tool_calls"];
    t.notes.push_back(fmt::format("the reply made {} tool call(s)", pending_calls_.size()));
  }
  history_.push_back({std::move(m)});
}

void ClientSim::reorder_last_results(ClientTurn& t) {
  if (last_results_.size() < 2) return;
  std::vector<json> group;
  for (size_t i : last_results_) group.push_back(history_[i].message);
  const size_t shift = 1 + rng_.below(group.size() - 1);  // a rotation that moves every result
  std::rotate(group.begin(), group.begin() + static_cast<std::ptrdiff_t>(shift), group.end());
  for (size_t k = 0; k < last_results_.size(); ++k) {
    history_[last_results_[k]].message = std::move(group[k]);
    history_[last_results_[k]].reordered = true;
  }
  t.notes.push_back(fmt::format("re-sent the {} results of its last tool turn in another order (messages {}..{})",
                                last_results_.size(), last_results_.front() + 1, last_results_.back() + 1));
}

void ClientSim::edit_earlier(ClientTurn& t) {
  std::vector<size_t> candidates;
  for (size_t i = 0; i + 1 < history_.size(); ++i) {
    const json& m = history_[i].message;
    const std::string role = m.value("role", "");
    if ((role == "user" || role == "tool") && text_of(m) != kClearedResult) candidates.push_back(i);
  }
  if (candidates.empty()) return;
  const size_t i = candidates[rng_.below(candidates.size())];
  json& m = history_[i].message;
  if (m["role"] == "tool") {
    m["content"] = kClearedResult;
  } else {
    const auto size = static_cast<double>(text_of(m).size());
    m["content"] = user_text(std::max<uint64_t>(8, static_cast<uint64_t>(size / bytes_per_token(TextKind::kProse))));
  }
  history_[i].edited = true;
  t.notes.push_back(fmt::format("rewrote message {} ({})", i + 1, m["role"].get<std::string>()));
}

void ClientSim::add_results(ClientTurn& t) {
  t.kind = "tool_results";
  const uint64_t growth = turn_growth();
  const size_t n = pending_calls_.size();
  for (const auto& call : pending_calls_) {
    const std::string id = call.value("id", "");
    std::string name = "read_file";
    if (call.contains("function") && call["function"].is_object()) name = call["function"].value("name", name);
    uint64_t tokens = std::max<uint64_t>(16, growth / n);
    if (rng_.chance(spec_.huge_results)) {
      tokens = static_cast<uint64_t>((0.2 + 0.4 * rng_.unit()) * static_cast<double>(spec_.context_tokens));
      t.notes.push_back(fmt::format("a huge {} result (~{} tokens)", name, tokens));
    }
    last_results_.push_back(history_.size());
    history_.push_back({{{"role", "tool"}, {"tool_call_id", id}, {"content", result_text(name, tokens)}}});
  }
  t.tool_results = n;
  pending_calls_ = json::array();
}

void ClientSim::add_user_message() {
  history_.push_back({{{"role", "user"}, {"content", user_text(turn_growth())}}});
}

void ClientSim::apply_window(ClientTurn& t) {
  size_t drop = 0;
  if (spec_.window_messages > 0 && history_.size() > spec_.window_messages) drop = history_.size() - spec_.window_messages;
  if (spec_.window_tokens > 0) {
    std::vector<uint64_t> sizes;
    uint64_t total = 0;
    for (const auto& e : history_) total += sizes.emplace_back(estimated_tokens(util::json_text(e.message)));
    for (size_t i = 0; i < drop; ++i) total -= sizes[i];
    while (drop + 1 < history_.size() && total > spec_.window_tokens) total -= sizes[drop++];
  }
  // The newest message stays; a simple client's window may cut into this turn's others.
  drop = std::min(drop, history_.empty() ? size_t{0} : history_.size() - 1);
  if (drop == 0) return;
  history_.erase(history_.begin(), history_.begin() + static_cast<std::ptrdiff_t>(drop));
  std::vector<size_t> kept;
  for (size_t i : last_results_) {
    if (i >= drop) kept.push_back(i - drop);
  }
  last_results_ = std::move(kept);
  t.dropped = drop;
  t.notes.push_back(fmt::format("its window dropped the {} oldest message(s)", drop));
}

json ClientSim::compose(bool require_tool, const json& extra, bool summary) {
  json messages = json::array({{{"role", "system"}, {"content", system_text()}}});
  for (const auto& e : history_) {
    json m = e.message;
    if (e.env_block && spec_.ids.first_user && m["content"].is_string()) {
      m["content"] = fmt::format("<environment>\nrequest_id: {}\ncurrent_time: {}\ntrace: {}\n</environment>\n",
                                 make_id(rng_, IdFormat::kRequestId, clock_ms_), iso_time(clock_ms_),
                                 make_id(rng_, IdFormat::kTraceparent, clock_ms_)) +
                     m["content"].get<std::string>();
    }
    messages.push_back(std::move(m));
  }
  for (const auto& m : extra) messages.push_back(m);
  json body = {{"model", "default"},
               {"messages", std::move(messages)},
               {"max_tokens", summary ? spec_.summary_max_tokens : spec_.max_tokens},
               {"temperature", 0},
               {"stream", spec_.stream}};
  if (spec_.stream) body["stream_options"] = {{"include_usage", true}};
  if (!tools_.is_null()) {
    body["tools"] = tools_;
    body["tool_choice"] = summary ? "none" : require_tool ? "required" : "auto";
    body["parallel_tool_calls"] = true;
  }
  return body;
}

void ClientSim::finish(ClientTurn& t, size_t added) {
  const size_t n = history_.size() + 1;  // with the system prompt
  t.increment_from = added >= n ? size_t{1} : n - added;
  for (size_t i = 0; i < history_.size(); ++i) {
    if (history_[i].edited) {
      t.rewritten_from = i + 1;
      break;
    }
  }
}

std::string ClientSim::system_text() {
  if (!spec_.ids.system) return system_base_;
  const std::string now = iso_time(clock_ms_);
  return fmt::format("Current time: {} {} UTC (request {})\n", now.substr(0, 10), now.substr(11, 8),
                     make_id(rng_, IdFormat::kRequestId, clock_ms_)) +
         system_base_;
}

std::string ClientSim::user_text(uint64_t tokens) {
  std::string head;
  if (spec_.ids.messages) {
    head = fmt::format("[request {} at {}]\n", make_id(rng_, IdFormat::kUuid, clock_ms_), iso_time(clock_ms_));
  }
  const TextKind kind = pick_kind(rng_, spec_.mix);
  if (kind == TextKind::kProse || kind == TextKind::kChinese) return head + make_text(rng_, kind, tokens);
  const TextKind lead = mostly_chinese(spec_.mix) ? TextKind::kChinese : TextKind::kProse;
  return head + make_text(rng_, lead, 12) + "\n```\n" + make_text(rng_, kind, tokens, clock_ms_) + "\n```";
}

std::string ClientSim::result_text(const std::string& tool, uint64_t tokens) {
  TextKind kind = TextKind::kLog;
  if (tool == "read_file") kind = TextKind::kCode;
  if (tool == "fetch_url") kind = mostly_chinese(spec_.mix) ? TextKind::kChinese : TextKind::kProse;
  std::string head;
  if (spec_.ids.tool_results) {
    head = fmt::format("request_id: {}\nfetched_at: {}\n", make_id(rng_, IdFormat::kUuid, clock_ms_),
                       iso_time(clock_ms_));
  }
  return head + make_text(rng_, kind, tokens, clock_ms_ - 3'600'000, spec_.ids.tool_results);
}

uint64_t ClientSim::turn_growth() {
  const uint64_t g = std::max<uint64_t>(spec_.growth_tokens, 2);
  return rng_.between(g / 2, g + g / 2);
}

std::vector<ClientSpec> client_family(uint64_t context_tokens, size_t turns) {
  const ClientSpec base{.context_tokens = context_tokens};
  std::vector<ClientSpec> family;
  auto add = [&](std::string name, auto&& change) {
    ClientSpec s = base;
    s.name = std::move(name);
    change(s);
    if (s.tool_turns > 0) s.max_tokens = 128;  // room for two calls (tool_model.h)
    family.push_back(std::move(s));
  };
  const size_t window = std::max<size_t>(8, std::min<size_t>(30, turns));
  add("append", [](ClientSpec&) {});
  add("append-zh", [](ClientSpec& s) { s.mix = {.prose = 0.1, .code = 0.1, .log = 0.1, .chinese = 0.7}; });
  add("window-messages", [&](ClientSpec& s) { s.window_messages = window; });
  add("window-tokens", [&](ClientSpec& s) { s.window_tokens = context_tokens / 2; });
  add("window-large", [&](ClientSpec& s) { s.window_tokens = context_tokens; });  // above H = 3/4 of it
  add("tools", [](ClientSpec& s) {
    s.tool_turns = 0.8;
    s.huge_results = 0.1;
    s.reorder_results = true;
  });
  add("ids", [](ClientSpec& s) {
    s.ids = {.system = true, .first_user = true, .messages = true, .tool_results = true};
    s.tool_turns = 0.4;
  });
  add("self-summary", [&](ClientSpec& s) { s.summarise_every = std::max<size_t>(4, turns / 4); });
  add("edits", [](ClientSpec& s) {
    s.edit_every = 4;
    s.tool_turns = 0.3;
  });
  add("pasted", [](ClientSpec& s) { s.pasted_history = 3; });
  add("parallel", [](ClientSpec& s) { s.parallel = 3; });
  add("user-report", [&](ClientSpec& s) {
    s.window_messages = window;
    s.tool_turns = 0.5;
    s.reorder_results = true;
    s.ids = {.messages = true, .tool_results = true};
  });
  return family;
}

Result<std::vector<ClientSpec>> select_behaviours(const std::vector<ClientSpec>& family, std::string_view names) {
  if (names == "all") return family;
  std::vector<ClientSpec> out;
  size_t pos = 0;
  while (pos <= names.size()) {
    size_t end = names.find(',', pos);
    if (end == std::string_view::npos) end = names.size();
    const std::string_view name = names.substr(pos, end - pos);
    pos = end + 1;
    if (name.empty()) continue;
    auto it = std::find_if(family.begin(), family.end(), [&](const ClientSpec& s) { return s.name == name; });
    if (it == family.end()) {
      std::string known;
      for (const auto& s : family) known += (known.empty() ? "" : ", ") + s.name;
      return Error(fmt::format("unknown behaviour \"{}\" (known: {}, or all)", name, known));
    }
    out.push_back(*it);
  }
  if (out.empty()) return Error("no behaviour named (known: the family's names, or all)");
  return out;
}

Result<std::vector<uint64_t>> parse_seeds(std::string_view text) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string item(text.substr(pos, end - pos));
    pos = end + 1;
    char* stop = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &stop, 10);
    if (item.empty() || stop != item.c_str() + item.size()) {
      return Error(fmt::format("seeds: \"{}\" is not a number (a list such as 1,2,3)", item));
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace kvgate::bench
