// GET /slots through the gateway. The engines list each slot with the last request it served:
// ik_llama.cpp includes that request's whole prompt text ("prompt"), and both forks its
// sampling parameters (stop strings, grammar — tool schemas —, logit bias). A slot serves many
// conversations, of every API key, so that text is another conversation's content: the
// gateway passes on only a slot's numbers and flags (id, state, n_ctx, counts, is_processing)
// and the model name. kvgate's own view of which conversation holds which slot is
// /kvgate/v1/status (scoped by key).
#pragma once

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

// The engine's /slots answer without any text a request brought: per slot (and in nested
// objects such as next_token) only numbers, booleans and the "model" string are kept. Anything
// that is not an array of objects becomes an empty array.
nlohmann::json slots_without_content(const nlohmann::json& slots);

}  // namespace kvgate::gateway
