// The model id kvgate's answers carry (all wire APIs, streamed or whole) and /v1/models lists.
// The engine names the model by the path of its file; clients get an id instead. Pure.
#pragma once

#include <string>
#include <string_view>

namespace kvgate::gateway {

// The id /v1/models lists for the model kvgate serves as `model_name` (its alias, or its file
// name): without ".gguf" and without folders, should a path have been given; "kvgate" if empty.
std::string listed_model(std::string model_name);

// The id an answer carries: the one the client asked for (any name is the one model served,
// as /v1/models/{id} answers), else listed_model(model_name).
std::string answer_model(std::string_view requested, const std::string& model_name);

}  // namespace kvgate::gateway
