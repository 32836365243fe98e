#include "upstream/upstream_facts.h"

namespace kvgate::gateway {

using nlohmann::json;

namespace {

std::optional<uint64_t> unsigned_at(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_unsigned()) return std::nullopt;
  return j[key].get<uint64_t>();
}

std::string string_at(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

}  // namespace

UpstreamFacts read_props(const json& props) {
  UpstreamFacts f;
  if (!props.is_object()) {
    f.unknown = {"context", "slots", "fork"};
    return f;
  }
  if (auto n = unsigned_at(props, "total_slots"); n && *n > 0 && *n < 4096) f.slots = static_cast<int>(*n);
  const json dgs = props.value("default_generation_settings", json::object());
  if (auto n = unsigned_at(dgs, "n_ctx"); n && *n > 0 && *n <= UINT32_MAX) {
    f.n_ctx_slot = static_cast<uint32_t>(*n);
  } else if (auto total = unsigned_at(props, "n_ctx"); total && *total > 0) {
    f.n_ctx_slot = static_cast<uint32_t>(std::min<uint64_t>(*total / static_cast<uint64_t>(f.slots.value_or(1)), UINT32_MAX));
  }
  f.build = string_at(props, "build_info");
  if (!f.build.empty()) {
    f.fork = plan::Fork::kMainline;
  } else if (props.contains("system_prompt") || props.contains("n_ctx")) {
    f.fork = plan::Fork::kIk;  // fields only ik's /props has
  }
  f.model = string_at(props, "model_path");
  if (f.model.empty()) f.model = string_at(props, "model_alias");
  if (!f.n_ctx_slot) f.unknown.push_back("context");
  if (!f.slots) f.unknown.push_back("slots");
  if (!f.fork) f.unknown.push_back("fork");
  return f;
}

void read_models(const json& models, UpstreamFacts& f) {
  if (!models.is_object() || !models.contains("data") || !models["data"].is_array() || models["data"].empty())
    return;
  const json& card = models["data"][0];
  f.server = string_at(card, "owned_by");
  if (f.model.empty()) f.model = string_at(card, "id");
  if (f.n_ctx_slot) return;
  if (auto n = unsigned_at(card, "max_model_len"); n && *n > 0 && *n <= UINT32_MAX) {
    f.n_ctx_slot = static_cast<uint32_t>(*n);
    std::erase(f.unknown, "context");
  }
}

}  // namespace kvgate::gateway
