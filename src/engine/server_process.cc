#include "engine/server_process.h"

#include <httplib.h>

#include <thread>

#include <fmt/format.h>

#include "util/net.h"
#include "util/private_files.h"

namespace kvgate::engine {

Result<std::unique_ptr<ServerProcess>> ServerProcess::start(ServerLaunch launch) {
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  server->host_ = launch.host;
  server->port_ = launch.port;
  if (server->port_ == 0) {
    KV_ASSIGN_OR_RETURN(server->port_, util::pick_free_port());
  }
  server->ring_limit_ = launch.ring_lines;
  server->observer_ = std::move(launch.on_line);
  if (launch.log_file) {
    KV_TRY(util::make_private_dir(launch.log_file->parent_path()).with_context("engine log"));
    KV_TRY(util::make_private_file(*launch.log_file).with_context("engine log"));
    server->log_.open(*launch.log_file, std::ios::app);
    if (!server->log_) return Error(fmt::format("cannot open log file '{}'", launch.log_file->string()));
  }
  server->argv_.push_back(launch.binary.string());
  server->argv_.insert(server->argv_.end(), launch.args.begin(), launch.args.end());
  server->argv_.insert(server->argv_.end(), {"--host", server->host_, "--port", std::to_string(server->port_)});
  ServerProcess* raw = server.get();
  KV_ASSIGN_OR_RETURN(server->process_,
                      util::Subprocess::spawn({.argv = server->argv_,
                                               .unset_env_prefixes = {"LLAMA_ARG_", "LLAMA_API_KEY"},
                                               .set_env = launch.env,
                                               .on_line = [raw](std::string_view l) { raw->on_line(l); }}));
  return server;
}

ServerProcess::~ServerProcess() {
  if (process_) process_->stop(std::chrono::seconds(5));
}

void ServerProcess::on_line(std::string_view line) {
  {
    std::lock_guard lock(mu_);
    ring_.emplace_back(line);
    while (ring_.size() > ring_limit_) ring_.pop_front();
    if (log_.is_open()) log_ << line << '\n';
  }
  if (observer_) observer_(line);
}

std::string ServerProcess::base_url() const {
  return fmt::format("http://{}:{}", host_, port_);
}

Status ServerProcess::wait_ready(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  httplib::Client client(host_, port_);
  client.set_connection_timeout(std::chrono::seconds(1));
  client.set_read_timeout(std::chrono::seconds(2));
  int last_status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto st = process_->exit_status()) {
      return Error(fmt::format("llama-server {} during startup; last log lines:\n{}", st->describe(), log_tail(25)));
    }
    if (auto res = client.Get("/health")) {
      last_status = res->status;
      if (res->status == 200) return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Error(fmt::format("llama-server did not become healthy within {} ms (last /health status: {}); "
                           "last log lines:\n{}",
                           timeout.count(), last_status == 0 ? "no answer" : std::to_string(last_status),
                           log_tail(25)));
}

util::ExitStatus ServerProcess::stop(std::chrono::milliseconds grace) {
  auto status = process_->stop(grace);
  std::lock_guard lock(mu_);
  if (log_.is_open()) log_.flush();
  return status;
}

std::vector<std::string> ServerProcess::log_lines() const {
  std::lock_guard lock(mu_);
  return {ring_.begin(), ring_.end()};
}

std::string ServerProcess::log_tail(size_t n) const {
  std::lock_guard lock(mu_);
  std::string out;
  const size_t start = ring_.size() > n ? ring_.size() - n : 0;
  for (size_t i = start; i < ring_.size(); ++i) out += "  | " + ring_[i] + "\n";
  return out;
}

}  // namespace kvgate::engine
