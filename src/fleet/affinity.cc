#include "fleet/affinity.h"

#include <algorithm>
#include <unordered_set>

#include <xxhash.h>

#include "gateway/conversation_name.h"
#include "util/json.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

uint64_t hash(std::string_view s, uint64_t seed) { return XXH3_64bits_withSeed(s.data(), s.size(), seed); }

// The key the request presents (Bearer or x-api-key), as a hash seed: clues of different
// keys never meet.
uint64_t scope_seed(const http::HttpRequest& request) {
  std::string presented;
  if (auto auth = request.header("authorization")) presented = std::string(*auth);
  if (auto key = request.header("x-api-key")) presented += "\x1f" + std::string(*key);
  return hash(presented, 0x6b76676174650001ULL);
}

std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return {};
  return util::json_text(v);
}

bool is_system(const json& item) {
  auto role = item.find("role");
  return role != item.end() && role->is_string() && (*role == "system" || *role == "developer");
}

// One message (chat completions, Anthropic) or input item (Responses) as fingerprinted text:
// its role and what it says, or nothing when it is too short to tell conversations apart.
std::optional<std::string> message_text(const json& item) {
  if (!item.is_object()) return std::nullopt;
  if (is_system(item)) return std::nullopt;
  std::string said;
  for (const char* field : {"content", "tool_calls", "tool_call_id", "output", "arguments", "call_id"}) {
    auto it = item.find(field);
    if (it != item.end()) said += text_of(*it) + "\x1e";
  }
  if (said.size() < kMinFingerprintBytes + 1) return std::nullopt;
  std::string out;
  if (auto role = item.find("role"); role != item.end()) out = text_of(*role);
  if (auto type = item.find("type"); type != item.end()) out += "/" + text_of(*type);
  return out + "\x1f" + said;
}

void add(RequestClues& c, std::unordered_set<uint64_t>& seen, uint64_t fp) {
  if (seen.insert(fp).second) c.fingerprints.push_back(fp);
}

// A raw completion's prompt: fixed 1 KiB blocks, each hashed with everything before it, so a
// block stands for the whole prefix up to its end.
void prompt_fingerprints(const std::string& prompt, uint64_t seed, RequestClues& c,
                         std::unordered_set<uint64_t>& seen) {
  constexpr size_t kBlock = 1024, kMaxBlocks = 512;
  for (size_t end = kBlock; end <= prompt.size() && end / kBlock <= kMaxBlocks; end += kBlock) {
    add(c, seen, hash(std::string_view(prompt).substr(0, end), seed));
  }
}

}  // namespace

RequestClues clues_of(const http::HttpRequest& request, const json& body) {
  RequestClues c;
  if (!body.is_object()) return c;
  const uint64_t seed = scope_seed(request);
  c.scope = std::to_string(seed);
  const bool chat = request.path == "/v1/chat/completions";
  const bool anthropic = request.path == "/v1/messages";
  const bool responses = request.path == "/v1/responses" || request.path == "/v1/responses/compact";
  std::optional<ConversationName> named;
  if (chat) {
    named = named_conversation(request.header("x-session-id"), body);
  } else {
    named = header_conversation(request.header("x-session-id"));
    auto key = body.find("prompt_cache_key");
    if (!named && responses && key != body.end() && key->is_string()) {
      named = cache_key_conversation(key->get_ref<const std::string&>());
    }
  }
  if (named) c.name = c.scope + "\x1f" + named->id;
  if (auto prev = body.find("previous_response_id"); responses && prev != body.end() && prev->is_string()) {
    c.previous_response = c.scope + "\x1f" + prev->get<std::string>();
  }
  std::unordered_set<uint64_t> seen;
  if (chat || anthropic || responses) {
    const json* items = nullptr;
    if (auto m = body.find(responses ? "input" : "messages"); m != body.end()) items = &*m;
    if (items && items->is_string()) {
      if (items->get_ref<const std::string&>().size() >= kMinFingerprintBytes) {
        add(c, seen, hash("user\x1f" + items->get<std::string>(), seed));
      }
    } else if (items && items->is_array()) {
      for (const auto& item : *items) {
        if (auto text = message_text(item)) add(c, seen, hash(*text, seed));
      }
    }
  } else if (auto prompt = body.find("prompt"); prompt != body.end() && prompt->is_string()) {
    prompt_fingerprints(prompt->get<std::string>(), seed, c, seen);
  }
  return c;
}

std::optional<std::string> AffinityIndex::find(const std::vector<uint64_t>& fingerprints) const {
  struct Votes {
    size_t count = 0;
    size_t first = 0;
  };
  std::unordered_map<std::string_view, Votes> votes;
  for (size_t i = 0; i < fingerprints.size(); ++i) {
    auto it = owner_.find(fingerprints[i]);
    if (it == owner_.end()) continue;
    auto [v, fresh] = votes.try_emplace(it->second, Votes{0, i});
    ++v->second.count;
  }
  const std::string_view* best = nullptr;
  Votes best_votes;
  for (const auto& [conv, v] : votes) {
    if (!best || v.count > best_votes.count || (v.count == best_votes.count && v.first < best_votes.first)) {
      best = &conv;
      best_votes = v;
    }
  }
  if (!best) return std::nullopt;
  return std::string(*best);
}

void AffinityIndex::drop_fingerprint(const std::string& conversation, uint64_t fp) {
  auto it = entries_.find(conversation);
  if (it == entries_.end()) return;
  auto& fps = it->second.fingerprints;
  fps.erase(std::remove(fps.begin(), fps.end(), fp), fps.end());
}

std::vector<std::string> AffinityIndex::record(const std::string& conversation,
                                               const std::vector<uint64_t>& fingerprints) {
  auto [it, fresh] = entries_.try_emplace(conversation);
  Entry& e = it->second;
  if (fresh) {
    lru_.push_front(conversation);
  } else {
    lru_.splice(lru_.begin(), lru_, e.lru);
  }
  e.lru = lru_.begin();
  for (uint64_t fp : fingerprints) {
    auto [o, added] = owner_.try_emplace(fp, conversation);
    if (!added) {
      if (o->second == conversation) continue;
      drop_fingerprint(o->second, fp);
      o->second = conversation;
    }
    e.fingerprints.push_back(fp);
  }
  while (e.fingerprints.size() > max_fingerprints_) {
    owner_.erase(e.fingerprints.front());
    e.fingerprints.erase(e.fingerprints.begin());
  }
  std::vector<std::string> forgotten;
  while (entries_.size() > max_conversations_) {
    const std::string oldest = lru_.back();
    lru_.pop_back();
    auto old = entries_.find(oldest);
    for (uint64_t fp : old->second.fingerprints) owner_.erase(fp);
    entries_.erase(old);
    forgotten.push_back(oldest);
  }
  return forgotten;
}

}  // namespace kvgate::gateway
