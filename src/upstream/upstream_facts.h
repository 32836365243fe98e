// What the gateway learns of a llama-server it did not start (kvgate serve): from GET /props,
// the context per slot and the slots, which fork it is, its build and model. Mainline's /props
// has `build_info` and `default_generation_settings.n_ctx` (per slot); ik_llama.cpp's has no
// build_info, a top-level `n_ctx` (all slots) and `system_prompt` (tests/fixtures/*/props.json,
// recorded from the pinned engine and the ik build). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/server_settings.h"

namespace kvgate::gateway {

struct UpstreamFacts {
  std::optional<uint32_t> n_ctx_slot;
  std::optional<int> slots;
  std::optional<plan::Fork> fork;
  std::string build;  // "b1-80fb11a" (mainline's build_info), "" when not said
  std::string model;  // its model path or alias
  std::string
      server;  // who the server says it is in /v1/models' owned_by ("vllm", "sglang"), "" when not read
  std::vector<std::string> unknown;  // what /props did not say, for the start-up message
};

UpstreamFacts read_props(const nlohmann::json& props);

// What /v1/models adds where /props said nothing (servers that have no /props): vLLM's and
// SGLang's model cards carry `max_model_len`, the most tokens one request may hold, which is
// the context per conversation; `owned_by` names the server ("vllm", "sglang", llama.cpp's
// "llamacpp"); `id` the model.
void read_models(const nlohmann::json& models, UpstreamFacts& facts);

}  // namespace kvgate::gateway
