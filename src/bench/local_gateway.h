// LocalGateway: kvgate's gateway running inside the benchmark process — a gateway::Gateway
// behind its own http::HttpServer on a free loopback port — in front of an engine, so
// the benchmark measures exactly the code `kvgate up` serves, over real HTTP.
//
// Sessions are durable as in production: with `store` set, they are written to that SQLite
// file every turn (the file is removed when the gateway goes away if `remove_store`). With
// `gateway.kv` enabled the gateway keeps conversations' engine states in gateway.kv.dir
// (kvstate/kv_keeper.h; the engine must run with that folder as its --slot-save-path).
//
// The engine may be replaced while the gateway runs (a crash and a restart): engine_restarted()
// points the gateway's upstream at the new engine and tells the gateway its cache is gone, as
// `kvgate up`'s supervisor does.
//
// Thread-safety: one owner; the gateway itself serves connections concurrently.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

#include "bench/http_client.h"
#include "gateway/gateway.h"
#include "http/http_server.h"
#include "upstream/upstream.h"
#include "util/result.h"

namespace kvgate::bench {

struct LocalGatewayOptions {
  gateway::GatewayOptions gateway;
  std::optional<std::filesystem::path> store;
  bool remove_store = true;
};

class LocalGateway {
 public:
  // A gateway in front of the engine at `engine` (through an HttpUpstream).
  static Result<std::unique_ptr<LocalGateway>> start(const Endpoint& engine, LocalGatewayOptions options);
  // The same in front of any upstream (e.g. one that times what passes through it).
  static Result<std::unique_ptr<LocalGateway>> start(std::shared_ptr<gateway::Upstream> upstream,
                                                     LocalGatewayOptions options);
  ~LocalGateway();
  LocalGateway(const LocalGateway&) = delete;
  LocalGateway& operator=(const LocalGateway&) = delete;

  // The engine was replaced by `engine` (on another port, maybe with another key): requests go
  // there from now on, and the gateway knows the slots no longer hold its conversations.
  // REQUIRES: started with an Endpoint; no request in flight (wait_idle()).
  void engine_restarted(const Endpoint& engine);
  // Waits until no request holds or waits for a place with the engine, so the work the gateway
  // does after an answer has reached the client (saving the slot's state) is done too. False
  // when `timeout` passed first.
  bool wait_idle(std::chrono::milliseconds timeout);

  Endpoint endpoint() const;
  gateway::Gateway& gateway() { return *gateway_; }

 private:
  // The engine's address, read by the upstream for every request and replaced by
  // engine_restarted(); guarded by mu.
  struct EngineAddress {
    std::mutex mu;
    Endpoint endpoint;
  };

  LocalGateway() = default;
  std::shared_ptr<EngineAddress> engine_;  // null when started on a caller's upstream
  std::unique_ptr<gateway::Gateway> gateway_;
  std::unique_ptr<http::HttpServer> server_;
  std::string api_key_;
  std::optional<std::filesystem::path> store_to_remove_;
};

}  // namespace kvgate::bench
