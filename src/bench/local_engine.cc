#include "bench/local_engine.h"

#include <csignal>
#include <random>

#include <fmt/format.h>

#include "engine/pinned.h"
#include "util/signals.h"

namespace kvgate::bench {

namespace {

std::string random_key() {
  std::random_device rd;
  std::string key;
  for (int i = 0; i < 4; ++i) key += fmt::format("{:08x}", rd());
  return key;
}

}  // namespace

std::vector<std::string> split_args(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\t' && text[j] != '\n') ++j;
    if (j > i) out.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

Result<std::unique_ptr<LocalEngine>> LocalEngine::start(const LocalEngineOptions& options) {
  KV_ASSIGN_OR_RETURN(auto binary, engine::resolve_server(options.server));
  std::error_code ec;
  if (!std::filesystem::is_regular_file(options.model, ec)) {
    return Error(fmt::format("--model {}: no such file", options.model.string()));
  }
  if (options.log_file) std::filesystem::remove(*options.log_file, ec);  // this run's log only
  std::unique_ptr<LocalEngine> e(new LocalEngine());
  e->options_ = options;
  e->binary_ = std::move(binary);
  e->api_key_ = random_key();
  e->args_ = {"-m",       options.model.string(),        "-c",        std::to_string(options.context),
              "-np",      std::to_string(options.slots), "--metrics", "--api-key",
              e->api_key_};
  e->args_.insert(e->args_.end(), options.extra_args.begin(), options.extra_args.end());
  KV_TRY(e->launch());
  return e;
}

Status LocalEngine::launch() {
  for (int attempt = 0;; ++attempt) {
    KV_ASSIGN_OR_RETURN(process_, engine::ServerProcess::start(
                                      {.binary = binary_, .args = args_, .log_file = options_.log_file}));
    auto ready = process_->wait_ready(options_.ready_timeout);
    if (ready.ok()) return util::ok_status();
    const std::string tail = process_->log_tail(40);
    process_->stop();
    if (attempt < 2 && tail.find("bind") != std::string::npos) continue;  // lost the port: try another
    return std::move(ready).error().with_context("starting the engine");
  }
}

Status LocalEngine::kill_and_restart() {
  kill();
  process_.reset();
  return launch().with_context("restarting the engine");
}

void LocalEngine::kill() {
  if (!process_) return;
  process_->signal(SIGKILL);
  process_->stop();  // reaps it (already dead: no grace period is waited)
}

LocalEngine::~LocalEngine() {
  if (process_) process_->stop();
}

Endpoint LocalEngine::endpoint() const {
  return {.host = process_->host(), .port = process_->port(), .api_key = api_key_};
}

std::string LocalEngine::command_line() const {
  std::string out;
  const auto& argv = process_->argv();
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i > 0) out += ' ';
    out += (i > 0 && argv[i - 1] == "--api-key") ? std::string("KEY") : argv[i];
  }
  return out;
}

}  // namespace kvgate::bench
