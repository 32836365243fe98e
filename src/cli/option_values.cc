// The values of `kvgate up`'s and `kvgate serve`'s options that other code reads too (up_options.h):
// listen addresses, durations, the host names the gateway answers to, API key files.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "cli/up_options.h"
#include "device/tree.h"

namespace kvgate::cli {

Result<ListenAddress> parse_listen(std::string_view text) {
  ListenAddress a;
  std::string port_text(text);
  const size_t colon = text.rfind(':');
  if (colon != std::string_view::npos) {
    a.host = std::string(text.substr(0, colon));
    port_text = std::string(text.substr(colon + 1));
    if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']')
      a.host = a.host.substr(1, a.host.size() - 2);
  } else {
    a.host = "127.0.0.1";
  }
  if (a.host.empty()) return Error(fmt::format("--listen '{}': no host (use HOST:PORT)", text));
  uint32_t port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    return Error(fmt::format("--listen '{}': expected HOST:PORT with a port from 1 to 65535", text));
  }
  a.port = static_cast<uint16_t>(port);
  return a;
}

Result<engine::Millis> parse_duration(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  const std::string num(text.substr(0, i));
  const std::string unit(text.substr(i));
  double value = 0;
  auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
  double scale = 0;
  if (unit == "ms")
    scale = 1;
  else if (unit == "s" || unit.empty())
    scale = 1000;
  else if (unit == "m" || unit == "min")
    scale = 60000;
  else if (unit == "h")
    scale = 3600000;
  else if (unit == "d")
    scale = 86400000;
  if (num.empty() || ec != std::errc() || ptr != num.data() + num.size() || scale == 0 ||
      value * scale > 1e15) {
    return Error(fmt::format("'{}' is not a duration (e.g. 500ms, 10s, 5m, 1h, 30d)", text));
  }
  return engine::Millis(static_cast<int64_t>(std::llround(value * scale)));
}

Result<std::vector<std::string>> parse_allowed_hosts(std::string_view text) {
  const auto name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
  };
  std::vector<std::string> names;
  for (std::string_view name : device::split(text, ',')) {
    if (name != "*" && (name.empty() || !std::all_of(name.begin(), name.end(), name_char))) {
      return Error(
          fmt::format("--allow-host '{}': expected host names without a port (e.g. gpu-box.lan), or '*' to "
                      "accept any Host; localhost and IP addresses are always accepted",
                      text));
    }
    names.emplace_back(name);
  }
  return names;
}

Result<std::vector<std::string>> keys_in_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(fmt::format("--api-key-file: cannot read '{}'", path));
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    keys.push_back(line);
  }
  if (keys.empty()) return Error(fmt::format("--api-key-file: '{}' holds no key", path));
  return keys;
}

}  // namespace kvgate::cli
