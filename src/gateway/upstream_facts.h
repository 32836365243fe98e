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
  std::vector<std::string> unknown;  // what /props did not say, for the start-up message
};

UpstreamFacts read_props(const nlohmann::json& props);

}  // namespace kvgate::gateway
