#include "engine/running_instance.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "engine/pinned.h"
#include "engine/process_facts.h"
#include "util/stop_signals.h"
#include "util/strings.h"

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

// The number after `marker` in `text`, or 0 (also when it is too large for a pid).
pid_t pid_after(std::string_view text, std::string_view marker) {
  const uint64_t value = util::number_after(text, marker);
  return value > (uint64_t{1} << 30) ? 0 : static_cast<pid_t>(value);
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
    auto r = parse_instance_description(read_small_file(it->path()));
    if (!r || seen.contains(r->pid)) continue;
    if (!process_alive(proc, r->pid) || !process_is_kvgate_up(proc, r->pid)) continue;
    seen.insert(r->pid);
    r->resident_bytes = process_resident_bytes(proc, r->pid) + process_resident_bytes(proc, r->engine_pid);
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
    if (!process_alive("/proc", instance.pid) && !process_alive("/proc", instance.engine_pid)) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Error(
      fmt::format("kvgate up (pid {}) is still running {} s after SIGTERM; stop it yourself "
                  "(kill -TERM {}, or its service manager)",
                  instance.pid, timeout.count(), instance.pid));
}

}  // namespace kvgate::engine
