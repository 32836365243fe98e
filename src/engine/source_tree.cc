// read_source_tree(): which fork a llama.cpp-family tree is, where its server is and which
// CMake options it declares (engine/engine_build.h).
#include <cctype>
#include <fstream>

#include <fmt/format.h>

#include "engine/engine_build.h"
#include "util/strings.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxCmakeFileBytes = 4 * 1024 * 1024;

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

Result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("cannot read '{}'", path.string()));
  std::string text(kMaxCmakeFileBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

std::set<std::string> declared_cmake_options(std::string_view text) {
  std::set<std::string> out;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const char c = text[i];
    if (c == '#') {  // comment to the end of the line
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    if (c == '"') {  // skip a quoted argument
      ++i;
      while (i < n && text[i] != '"') i += text[i] == '\\' ? 2U : 1U;
      ++i;
      continue;
    }
    if (!is_ident(c) || (i > 0 && is_ident(text[i - 1]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && is_ident(text[j])) ++j;
    const std::string word = util::ascii_lower(text.substr(i, j - i));
    i = j;
    if (word != "option" && word != "set") continue;
    while (j < n && (text[j] == ' ' || text[j] == '\t')) ++j;
    if (j >= n || text[j] != '(') continue;
    ++j;
    while (j < n && std::isspace(static_cast<unsigned char>(text[j])) != 0) ++j;
    size_t k = j;
    while (k < n && is_ident(text[k])) ++k;
    if (k == j) continue;
    const std::string name(text.substr(j, k - j));
    if (word == "option") {
      out.insert(name);
      continue;
    }
    // set(NAME value... CACHE TYPE "doc"): a cache entry only when CACHE comes before ')'.
    bool in_quotes = false;
    size_t m = k;
    for (; m < n; ++m) {
      if (text[m] == '"') in_quotes = !in_quotes;
      if (!in_quotes && text[m] == ')') break;
      if (!in_quotes && text.substr(m, 5) == "CACHE" && !is_ident(text[m - 1]) &&
          (m + 5 >= n || !is_ident(text[m + 5]))) {
        out.insert(name);
        break;
      }
    }
  }
  return out;
}

Result<SourceTree> read_source_tree(const fs::path& dir) {
  if (!is_dir(dir)) return Error(fmt::format("'{}' is not a directory", dir.string()));
  for (const char* need : {"CMakeLists.txt", "include/llama.h", "ggml/CMakeLists.txt"}) {
    if (!is_file(dir / need)) {
      return Error(fmt::format("'{}' is not a llama.cpp or ik_llama.cpp source tree: {} is missing",
                               dir.string(), need));
    }
  }
  SourceTree tree;
  tree.dir = dir;
  if (is_dir(dir / "ggml/src/iqk")) {
    tree.fork = plan::Fork::kIk;
    tree.fork_evidence = "ggml/src/iqk/ (ik_llama.cpp's CPU kernels) is present";
  } else {
    tree.fork = plan::Fork::kMainline;
    tree.fork_evidence = is_dir(dir / "ggml/src/ggml-cpu")
                             ? "ggml/src/ggml-cpu/ is present, ggml/src/iqk/ is not"
                             : "ggml/src/iqk/ is absent";
  }
  for (const char* server : {"tools/server", "examples/server"}) {
    if (is_file(dir / server / "CMakeLists.txt")) {
      tree.server_dir = server;
      break;
    }
  }
  if (tree.server_dir.empty()) {
    return Error(
        fmt::format("'{}' has no llama-server (neither tools/server/ nor examples/server/ has a "
                    "CMakeLists.txt)",
                    dir.string()));
  }
  for (const char* file : {"CMakeLists.txt", "ggml/CMakeLists.txt"}) {
    auto text = read_text(dir / file);
    if (!text) return std::move(text).error();
    tree.cmake_options.merge(declared_cmake_options(*text));
  }
  return tree;
}

}  // namespace kvgate::engine
