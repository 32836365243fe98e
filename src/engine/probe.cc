#include "engine/probe.h"

#include <fstream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#ifndef _WIN32
#include <sys/stat.h>
#endif

#include "engine/pinned.h"
#include "util/subprocess.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

constexpr size_t kProbeLines = 8;  // a rejected flag makes ik print its whole usage
constexpr size_t kHelpLines = 4000;

std::vector<std::string> split_args(std::string_view s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(' ', pos);
    if (end == std::string_view::npos) end = s.size();
    if (end > pos) out.emplace_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

struct Identity {
  std::string path;
  int64_t mtime_ns = 0;
  uint64_t size = 0;
};

// The file's modification time in nanoseconds (the platform's own clock: a change is all
// that matters).
int64_t modified_ns(const fs::path& file) {
#ifdef _WIN32
  std::error_code ec;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             fs::last_write_time(file, ec).time_since_epoch())
      .count();
#else
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + static_cast<int64_t>(st.st_mtim.tv_nsec);
#endif
}

Result<Identity> identify(const fs::path& binary) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(binary, ec);
  if (ec) return Error(fmt::format("cannot resolve '{}': {}", binary.string(), ec.message()));
  if (!fs::is_regular_file(canonical, ec) || !util::is_executable_file(canonical.string())) {
    return Error(fmt::format("'{}' is not an executable file", canonical.string()));
  }
  const uint64_t size = fs::file_size(canonical, ec);
  if (ec) return Error(fmt::format("cannot stat '{}'", canonical.string()));
  return Identity{canonical.string(), modified_ns(canonical), size};
}

// FNV-1a, for a short stable file name per binary path.
std::string path_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

std::optional<plan::ProbeRecord> read_cached(const fs::path& file, const Identity& id) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  auto rec = plan::parse_probe_record(ss.str());
  if (!rec || rec->binary != id.path || rec->mtime_ns != id.mtime_ns || rec->size != id.size)
    return std::nullopt;
  return std::move(*rec);
}

Status write_cache(const fs::path& file, const plan::ProbeRecord& rec) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path tmp = file.string() + fmt::format(".tmp{}", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << plan::format_probe_record(rec);
    if (!out) return Error(fmt::format("cannot write '{}'", tmp.string()));
  }
  fs::rename(tmp, file, ec);
  if (ec) return Error(fmt::format("cannot rename '{}': {}", tmp.string(), ec.message()));
  return {};
}

}  // namespace

Result<plan::ProbeOutcome> SubprocessProbeRunner::run(const fs::path& binary,
                                                      const std::vector<std::string>& args,
                                                      size_t max_lines) {
  std::mutex mu;
  plan::ProbeOutcome out;
  util::SpawnOptions spawn;
  spawn.argv.push_back(binary.string());
  spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
  spawn.unset_env_prefixes = {"LLAMA_ARG_"};
  spawn.on_line = [&](std::string_view line) {
    std::lock_guard lock(mu);
    if (out.lines.size() < max_lines) out.lines.emplace_back(line);
  };
  KV_ASSIGN_OR_RETURN(auto child, util::Subprocess::spawn(std::move(spawn)));
  const bool finished = child->wait_for(timeout_).has_value();
  const util::ExitStatus status = child->stop(std::chrono::milliseconds(500));  // joins the reader
  if (!finished) {
    return Error(fmt::format("'{} {}' did not exit within {} ms", binary.string(), fmt::join(args, " "),
                             timeout_.count()));
  }
  std::lock_guard lock(mu);
  out.exit_code = status.signaled() ? -status.signal : status.code;
  return out;
}

Result<plan::ProbeRecord> record_probes(const fs::path& binary, ProbeRunner& runner) {
  KV_ASSIGN_OR_RETURN(const Identity id, identify(binary));
  plan::ProbeRecord rec;
  rec.binary = id.path;
  rec.mtime_ns = id.mtime_ns;
  rec.size = id.size;
  auto run = [&](const std::string& args, size_t max_lines) -> Status {
    KV_ASSIGN_OR_RETURN(auto outcome, runner.run(id.path, split_args(args), max_lines));
    rec.runs[args] = std::move(outcome);
    return {};
  };
  KV_TRY(run("--version", kProbeLines));
  if (rec.runs["--version"].exit_code != 0) return rec;  // analyze_probes explains it
  KV_TRY(run("--help", kHelpLines));
  for (std::string_view probe : plan::flag_probes())
    KV_TRY(run(std::string(probe) + " --version", kProbeLines));
  return rec;
}

Result<ProbeResult> probe_server(const fs::path& binary, const ProbeOptions& options) {
  KV_ASSIGN_OR_RETURN(const Identity id, identify(binary));
  const fs::path dir = options.cache_dir.empty() ? cache_root() / "probe" : options.cache_dir;
  ProbeResult result;
  result.cache_file = dir / (path_hash(id.path) + ".txt");
  if (options.use_cache) {
    if (auto cached = read_cached(result.cache_file, id)) {
      auto caps = plan::analyze_probes(*cached);
      if (caps) {  // else: an older record lacking newer probes; probe again
        result.caps = std::move(*caps);
        result.from_cache = true;
        return result;
      }
    }
  }
  SubprocessProbeRunner default_runner;
  ProbeRunner& runner = options.runner ? *options.runner : default_runner;
  KV_ASSIGN_OR_RETURN(auto rec, record_probes(id.path, runner));
  auto caps = plan::analyze_probes(rec);
  if (!caps) return std::move(caps).error().with_context(fmt::format("probing '{}'", id.path));
  if (options.use_cache)
    (void)write_cache(result.cache_file, rec);  // a cache that cannot be written costs a re-probe
  result.caps = std::move(*caps);
  return result;
}

}  // namespace kvgate::engine
