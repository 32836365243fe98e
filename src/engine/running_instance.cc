#include "engine/running_instance.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "engine/pinned.h"
#include "util/stop_signals.h"
#include "util/strings.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

std::string read_small(const fs::path& path) {
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

// The number after `marker` in `text`, or 0 (also when it is too large for a pid).
pid_t pid_after(std::string_view text, std::string_view marker) {
  const uint64_t value = util::number_after(text, marker);
  return value > (uint64_t{1} << 30) ? 0 : static_cast<pid_t>(value);
}

// argv[0] named kvgate and argv[1] "up", from /proc/PID/cmdline (NUL-separated).
bool is_kvgate_up(const fs::path& proc, pid_t pid) {
  const std::string cmdline = read_small(proc / std::to_string(pid) / "cmdline");
  const size_t first = cmdline.find('\0');
  if (first == std::string::npos) return false;
  const std::string argv0 = cmdline.substr(0, first);
  const std::string argv1 = cmdline.substr(first + 1, cmdline.find('\0', first + 1) - first - 1);
  return fs::path(argv0).filename() == "kvgate" && argv1 == "up";
}

uint64_t resident_bytes(const fs::path& proc, pid_t pid) {
  if (pid <= 0) return 0;
  const std::string status = read_small(proc / std::to_string(pid) / "status");
  const size_t at = status.find("VmRSS:");
  if (at == std::string::npos) return 0;
  return std::strtoull(status.c_str() + at + 6, nullptr, 10) * 1024;
}

// Alive and not a zombie waiting for its parent: /proc/PID/stat's state after "(comm) ".
bool alive(const fs::path& proc, pid_t pid) {
  if (pid <= 0) return false;
  const std::string stat = read_small(proc / std::to_string(pid) / "stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  return stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

}  // namespace

std::optional<RunningInstance> parse_instance_description(std::string_view text) {
  if (!text.starts_with("kvgate up (pid ")) return std::nullopt;
  RunningInstance r;
  r.pid = pid_after(text, "kvgate up (pid ");
  if (r.pid <= 0) return std::nullopt;
  r.engine_pid = pid_after(text, "engine pid ");
  r.description = std::string(text);
  return r;
}

std::vector<RunningInstance> find_running_instances(const fs::path& lock_dir, const fs::path& proc) {
  const fs::path dir = lock_dir.empty() ? cache_root() / "locks" : lock_dir;
  std::vector<RunningInstance> out;
  std::set<pid_t> seen;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".lock") continue;
    auto r = parse_instance_description(read_small(it->path()));
    if (!r || seen.contains(r->pid)) continue;
    if (!alive(proc, r->pid) || !is_kvgate_up(proc, r->pid)) continue;
    seen.insert(r->pid);
    r->resident_bytes = resident_bytes(proc, r->pid) + resident_bytes(proc, r->engine_pid);
    out.push_back(std::move(*r));
  }
  return out;
}

Status stop_instance(const RunningInstance& instance, std::chrono::seconds timeout) {
  if (auto st = util::request_stop(instance.pid); !st.ok()) {
    return Error(fmt::format("cannot stop kvgate up (pid {}): {}", instance.pid, st.error().message()));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!alive("/proc", instance.pid) && !alive("/proc", instance.engine_pid)) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Error(
      fmt::format("kvgate up (pid {}) is still running {} s after SIGTERM; stop it yourself "
                  "(kill -TERM {}, or its service manager)",
                  instance.pid, timeout.count(), instance.pid));
}

}  // namespace kvgate::engine
