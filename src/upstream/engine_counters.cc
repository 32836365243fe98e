#include "upstream/engine_counters.h"

#include <cstdlib>
#include <string>

namespace kvgate::gateway {

std::optional<EngineCounters> parse_engine_counters(std::string_view text) {
  EngineCounters c;
  bool computed = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line.front() == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, space);
    const std::string value(line.substr(space + 1));
    char* parsed_end = nullptr;
    const double v = std::strtod(value.c_str(), &parsed_end);
    if (parsed_end == value.c_str() || !(v >= 0) || v > 1e18) continue;
    const auto n = static_cast<uint64_t>(v);
    if (name == "llamacpp:prompt_tokens_total") {
      c.prompt_computed = n;
      computed = true;
    } else if (name == "llamacpp:prompt_tokens_cached_total") {
      c.prompt_cached = n;
      c.cached_known = true;
    } else if (name == "llamacpp:tokens_predicted_total") {
      c.generated = n;
    }
  }
  if (!computed) return std::nullopt;
  return c;
}

std::optional<EngineCounters> counters_growth(const EngineCounters& a, const EngineCounters& b) {
  if (b.prompt_computed < a.prompt_computed || b.prompt_cached < a.prompt_cached ||
      b.generated < a.generated) {
    return std::nullopt;
  }
  return EngineCounters{.prompt_computed = b.prompt_computed - a.prompt_computed,
                        .prompt_cached = b.prompt_cached - a.prompt_cached,
                        .generated = b.generated - a.generated,
                        .cached_known = a.cached_known && b.cached_known};
}

}  // namespace kvgate::gateway
