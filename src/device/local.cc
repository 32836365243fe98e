// read_local_facts(): the real machine. nvidia-smi runs only when it is on PATH, with a
// deadline, so a hung driver cannot stall `kvgate doctor` or `kvgate up`.
#include <chrono>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "device/facts.h"
#include "device/tree.h"
#include "util/subprocess.h"

namespace kvgate::device {
namespace {

// The query's output, or nullopt with a note when nvidia-smi is absent or fails.
std::optional<std::string> run_nvidia_smi(std::vector<std::string>& notes) {
  auto binary = util::find_program("nvidia-smi");
  if (!binary) return std::nullopt;
  std::mutex mu;
  std::string output;
  auto child = util::Subprocess::spawn(
      {.argv = {*binary, "--query-gpu=name,compute_cap,memory.total,memory.free,clocks.sm,clocks.max.sm",
                "--format=csv,noheader,nounits"},
       .on_line = [&](std::string_view line) {
         std::lock_guard lock(mu);
         output.append(line).push_back('\n');
       }});
  if (!child) {
    notes.push_back(fmt::format("cannot run {}: {}", *binary, child.error().message()));
    return std::nullopt;
  }
  const auto status = (*child)->wait_for(std::chrono::seconds(15));
  // stop() also waits for the output reader, so `output` is complete after it.
  const util::ExitStatus final_status = (*child)->stop(std::chrono::seconds(1));
  std::lock_guard lock(mu);
  if (!status || final_status.signaled() || final_status.code != 0) {
    const std::string_view first = trim(split(output, '\n').front());
    notes.push_back(fmt::format("{} {}{}{}", *binary,
                                status ? final_status.describe() : "did not answer within 15 s",
                                first.empty() ? "" : ": ", first));
    return std::nullopt;
  }
  return output;
}

}  // namespace

Facts read_local_facts() {
  std::vector<std::string> notes;
  auto smi = run_nvidia_smi(notes);
  Facts f = read_facts("/", smi);
  f.notes.insert(f.notes.begin(), notes.begin(), notes.end());
  return f;
}

}  // namespace kvgate::device
