#include "session/conversation.h"

#include <fmt/format.h>

#include "util/strings.h"

#include "session/normalize.h"

namespace kvgate::session {

using nlohmann::json;
using util::utf8_ceil;
using util::utf8_floor;

namespace {

// Applies `f` to the text of a message's content (string or text parts).
template <typename F>
void map_text(json& message, F f) {
  auto it = message.find("content");
  if (it == message.end()) return;
  if (it->is_string()) {
    *it = f(it->get<std::string>());
  } else if (it->is_array()) {
    for (auto& part : *it) {
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string()) {
        part["text"] = f(part["text"].get<std::string>());
      }
    }
  }
}

// Appends text to the end of a message's content.
void append_text(json& message, const std::string& extra) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    message["content"] = extra;
  } else if (it->is_string()) {
    *it = it->get<std::string>() + extra;
  } else if (it->is_array()) {
    it->push_back({{"type", "text"}, {"text", extra}});
  }
}

}  // namespace

std::string truncation_marker(uint64_t elided_tokens) {
  return fmt::format("\n[… {} tokens elided by kvgate …]\n", elided_tokens);
}

std::string apply_truncation(const std::string& text, const Truncation& t) {
  if (t.head_chars + t.tail_chars >= text.size()) return text;
  const size_t head = utf8_floor(text, t.head_chars);
  const size_t tail_start = utf8_ceil(text, text.size() - t.tail_chars);
  return text.substr(0, head) + truncation_marker(t.elided_tokens) + text.substr(tail_start);
}

std::string summary_note_text(const SummaryNote& s) {
  return "[Summary of the earlier conversation, written by kvgate to stay within the context window]\n" + s.text;
}

void Conversation::truncate(uint64_t i) {
  if (i >= length) return;
  if (system && i == 0) {
    *this = Conversation();
    return;
  }
  if (summary && i < summary->covers_until) summary.reset();  // it summarised what the client changed
  if (summary && summary->anchor > i) summary->anchor = i;
  notes.erase(notes.lower_bound(i), notes.end());
  replies.erase(replies.lower_bound(i), replies.end());
  if (first_assistant >= i) first_assistant = i;
  if (i <= first_kept()) {
    kept.clear();
    cut = i;
  } else {
    kept.resize(static_cast<size_t>(i - first_kept()));
  }
  length = i;
  chain.resize(static_cast<size_t>(i));
  exact.resize(static_cast<size_t>(i));
}

void Conversation::drop_front(uint64_t i) {
  if (i <= first_kept() || i > length) return;
  kept.erase(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(i - first_kept()));
  cut = i;
  summary.reset();
  notes.erase(notes.begin(), notes.lower_bound(i));
}

void Conversation::append(const json& message) {
  const uint64_t hash = message_hash(message);
  StoredMessage m{hash, message};
  if (length == 0 && message.value("role", "") == "system") {
    system = m;
    if (pinned_system.empty()) {
      auto c = message.find("content");
      pinned_system = c != message.end() && c->is_string() ? c->get<std::string>() : std::string();
    }
  } else {
    kept.push_back(std::move(m));
  }
  extend_chain(chain, hash);
  exact.push_back(exact_hash(message));
  if (first_assistant == length && message.value("role", "") != "assistant") ++first_assistant;
  ++length;
}

void Conversation::append_reply(const json& message) {
  append(message);
  replies.insert(length - 1);
}

json build_view(const Conversation& c) {
  json view = json::array();
  if (c.system) {
    json sys = c.system->message;
    if (sys.contains("content") && sys["content"].is_string()) sys["content"] = c.pinned_system;
    if (c.summary && c.summary->after_system) sys["content"] = sys.value("content", "") + "\n\n" + summary_note_text(*c.summary);
    view.push_back(std::move(sys));
  } else if (c.summary && c.summary->after_system) {
    view.push_back({{"role", "user"}, {"content", summary_note_text(*c.summary)}});
  }
  for (uint64_t i = c.first_kept(); i < c.length; ++i) {
    if (c.summary && !c.summary->after_system && c.summary->anchor == i) {
      view.push_back({{"role", "user"}, {"content", summary_note_text(*c.summary)}});
    }
    const StoredMessage& m = c.at(i);
    json msg = m.message;
    if (auto t = c.truncations.find(m.hash); t != c.truncations.end()) {
      map_text(msg, [&](const std::string& s) { return apply_truncation(s, t->second); });
    }
    if (auto n = c.notes.find(i); n != c.notes.end()) append_text(msg, n->second);
    view.push_back(std::move(msg));
  }
  if (c.summary && !c.summary->after_system && c.summary->anchor >= c.length && c.length > c.first_kept()) {
    view.push_back({{"role", "user"}, {"content", summary_note_text(*c.summary)}});
  }
  return view;
}

json Conversation::to_json() const {
  json kept_json = json::array();
  for (const auto& m : kept) kept_json.push_back({{"h", m.hash}, {"m", m.message}});
  json trunc = json::object();
  for (const auto& [h, t] : truncations) {
    trunc[std::to_string(h)] = {{"head", t.head_chars}, {"tail", t.tail_chars}, {"elided", t.elided_tokens}};
  }
  json notes_json = json::object();
  for (const auto& [h, n] : notes) notes_json[std::to_string(h)] = n;
  json out = {{"version", 1},
              {"pinned_system", pinned_system},
              {"cut", cut},
              {"length", length},
              {"kept", kept_json},
              {"truncations", trunc},
              {"notes", notes_json},
              {"chain", chain},
              {"exact", exact},
              {"replies", replies},
              {"first_assistant", first_assistant},
              {"generation", generation}};
  if (client_windows) out["client_windows"] = true;
  if (tools != 0) out["tools"] = tools;
  if (system) out["system"] = {{"h", system->hash}, {"m", system->message}};
  if (summary) {
    out["summary"] = {{"text", summary->text},         {"covers_until", summary->covers_until},
                      {"anchor", summary->anchor},     {"after_system", summary->after_system},
                      {"source", summary->source},     {"tokens", summary->tokens}};
  }
  return out;
}

std::optional<Conversation> Conversation::from_json(const json& j) {
  try {
    if (!j.is_object() || j.value("version", 0) != 1) return std::nullopt;
    Conversation c;
    c.pinned_system = j.at("pinned_system").get<std::string>();
    c.cut = j.at("cut").get<uint64_t>();
    c.length = j.at("length").get<uint64_t>();
    for (const auto& k : j.at("kept")) c.kept.push_back({k.at("h").get<uint64_t>(), k.at("m")});
    for (const auto& [h, t] : j.at("truncations").items()) {
      c.truncations[std::stoull(h)] = {t.at("head").get<size_t>(), t.at("tail").get<size_t>(), t.at("elided").get<uint64_t>()};
    }
    for (const auto& [h, n] : j.at("notes").items()) c.notes[std::stoull(h)] = n.get<std::string>();
    c.chain = j.at("chain").get<std::vector<uint64_t>>();
    c.generation = j.value("generation", uint64_t{0});
    c.client_windows = j.value("client_windows", false);
    c.tools = j.value("tools", uint64_t{0});
    if (j.contains("exact")) c.exact = j["exact"].get<std::vector<uint64_t>>();
    if (j.contains("replies")) c.replies = j["replies"].get<std::set<uint64_t>>();
    // Not known for a state saved before it was kept: as if there were none (no evidence).
    c.first_assistant = std::min(j.value("first_assistant", c.length), c.length);
    if (j.contains("system")) c.system = StoredMessage{j["system"].at("h").get<uint64_t>(), j["system"].at("m")};
    if (j.contains("summary")) {
      const auto& s = j["summary"];
      c.summary = SummaryNote{s.at("text").get<std::string>(), s.at("covers_until").get<uint64_t>(),
                              s.at("anchor").get<uint64_t>(), s.at("after_system").get<bool>(),
                              s.at("source").get<std::string>(), s.at("tokens").get<uint64_t>()};
    }
    if (c.kept.size() != c.length - std::min(c.length, c.first_kept()) || c.chain.size() != c.length) return std::nullopt;
    if (c.exact.size() != c.length) {
      // Saved before exact hashes were kept: known for the messages still held, unknown
      // (never equal to a request's) for those before the cut.
      c.exact.assign(static_cast<size_t>(c.length), 0);
      if (c.system) c.exact[0] = exact_hash(c.system->message);
      for (uint64_t i = c.first_kept(); i < c.length; ++i) c.exact[static_cast<size_t>(i)] = exact_hash(c.at(i).message);
    }
    if (!c.replies.empty() && *c.replies.rbegin() >= c.length) return std::nullopt;
    return c;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace kvgate::session
