#include "upstream/model_id.h"

#include <nlohmann/json.hpp>

namespace kvgate::gateway {

std::string listed_model(std::string name) {
  if (name.size() > 5 && name.ends_with(".gguf")) {
    name.resize(name.size() - 5);
    // A model file's path: its name only (an alias such as "org/model" keeps its slash).
    if (auto slash = name.find_last_of("/\\"); slash != std::string::npos) name.erase(0, slash + 1);
  }
  return name.empty() ? std::string("kvgate") : name;
}

std::string answer_model(std::string_view requested, const std::string& model_name) {
  return requested.empty() ? listed_model(model_name) : std::string(requested);
}

std::string answer_model_for(const nlohmann::json& body, const std::string& model_name) {
  auto m = body.find("model");
  return answer_model(
      m != body.end() && m->is_string() ? m->get_ref<const std::string&>() : std::string_view(), model_name);
}

bool rename_model(nlohmann::json& answer, const std::string& model) {
  if (!answer.is_object()) return false;
  auto m = answer.find("model");
  if (m == answer.end() || !m->is_string() || m->get_ref<const std::string&>() == model) return false;
  *m = model;
  return true;
}

}  // namespace kvgate::gateway
