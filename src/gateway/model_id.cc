#include "gateway/model_id.h"

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

}  // namespace kvgate::gateway
