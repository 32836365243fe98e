// LocalGateway: kvgate's gateway running inside the benchmark process — a gateway::Gateway
// behind its own gateway::HttpServer on a free loopback port — in front of an engine, so
// the benchmark measures exactly the code `kvgate up` serves, over real HTTP.
//
// Sessions are durable as in production: with `store` set, they are written to that SQLite
// file every turn (the file is removed when the gateway goes away if `remove_store`).
//
// Thread-safety: one owner; the gateway itself serves connections concurrently.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "bench/http_client.h"
#include "gateway/gateway.h"
#include "gateway/http_server.h"
#include "gateway/upstream.h"
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

  Endpoint endpoint() const;
  gateway::Gateway& gateway() { return *gateway_; }

 private:
  LocalGateway() = default;
  std::unique_ptr<gateway::Gateway> gateway_;
  std::unique_ptr<gateway::HttpServer> server_;
  std::string api_key_;
  std::optional<std::filesystem::path> store_to_remove_;
};

}  // namespace kvgate::bench
