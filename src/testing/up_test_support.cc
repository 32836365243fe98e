#include "testing/up_test_support.h"

#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <signal.h>
#include "testing/paths.h"

namespace kvgate::testing {

std::string kvgate_binary() { return kvgate::testing::kvgate_path(); }

bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  if (!stat) return false;
  std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = s.rfind(')');
  return paren != std::string::npos && paren + 2 < s.size() && s[paren + 2] != 'Z';
}

UpProcess::UpProcess(std::vector<std::string> args, std::vector<std::string> prefix, std::string command) {
  std::vector<std::string> argv = std::move(prefix);
  argv.push_back(kvgate_binary());
  argv.push_back(std::move(command));
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = util::Subprocess::spawn({.argv = argv, .on_line = [this](std::string_view l) {
                                      std::lock_guard lock(mu_);
                                      out_ += std::string(l) + "\n";
                                      cv_.notify_all();
                                    }});
  if (!p.ok()) throw std::runtime_error(p.error().message());
  process_ = std::move(*p);
}

UpProcess::~UpProcess() {
  if (process_ && process_->running()) {
    process_->signal_group(SIGTERM);
    if (!process_->wait_for(std::chrono::seconds(20))) kill9();
  }
  if (process_) process_->stop();
}

bool UpProcess::wait_for(const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mu_);
  while (out_.find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    lock.unlock();
    const bool alive = process_->running();
    lock.lock();
    if (!alive && out_.find(text) == std::string::npos) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  return true;
}

int UpProcess::wait_exit(std::chrono::seconds timeout) {
  auto st = process_->wait_for(timeout);
  if (!st) return -1000;
  process_->stop();  // joins the output reader
  return st->signaled() ? -st->signal : st->code;
}

pid_t UpProcess::pid() const { return process_->pid(); }

bool UpProcess::running() { return process_->running(); }

void UpProcess::kill9() { ::kill(process_->pid(), SIGKILL); }

pid_t UpProcess::engine_pid() {
  std::lock_guard lock(mu_);
  static const std::regex re(R"(engine start #\d+: pid (\d+))");
  pid_t pid = 0;
  for (std::sregex_iterator it(out_.begin(), out_.end(), re), end; it != end; ++it) {
    pid = static_cast<pid_t>(std::stoi((*it)[1]));
  }
  return pid;
}

int UpProcess::engine_starts() {
  std::lock_guard lock(mu_);
  int n = 0;
  for (size_t at = out_.find("engine start #"); at != std::string::npos;
       at = out_.find("engine start #", at + 1))
    ++n;
  return n;
}

std::string UpProcess::output() {
  std::lock_guard lock(mu_);
  return out_;
}

std::vector<nlohmann::json> UpProcess::events(const std::string& event) {
  std::vector<nlohmann::json> out;
  std::istringstream in(output());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == event) out.push_back(std::move(j));
  }
  return out;
}

}  // namespace kvgate::testing
