// The model id kvgate's answers carry (all wire APIs, streamed or whole) and /v1/models lists.
// The engine names the model by the path of its file; clients get an id instead. Pure.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace kvgate::gateway {

// The id /v1/models lists for the model kvgate serves as `model_name` (its alias, or its file
// name): without ".gguf" and without folders, should a path have been given; "kvgate" if empty.
std::string listed_model(std::string model_name);

// The id an answer carries: the one the client asked for (any name is the one model served,
// as /v1/models/{id} answers), else listed_model(model_name).
std::string answer_model(std::string_view requested, const std::string& model_name);

// answer_model for a client's request body: its "model" when that is a string.
std::string answer_model_for(const nlohmann::json& body, const std::string& model_name);

// Names the model `model` in an engine's answer or stream chunk (an object with a "model"
// string): true when the name it had was another.
bool rename_model(nlohmann::json& answer, const std::string& model);

}  // namespace kvgate::gateway
