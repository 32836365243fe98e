#include "engine/process_facts.h"

#include <fstream>

namespace kvgate::engine {

std::string read_small_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string out;
  char buf[4096];
  while (in && out.size() < 64 * 1024) {
    in.read(buf, sizeof buf);
    out.append(buf, static_cast<size_t>(in.gcount()));
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace kvgate::engine
