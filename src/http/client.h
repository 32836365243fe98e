// Outgoing HTTP requests: the one way kvgate makes a cpp-httplib client, for the gateway's
// upstream calls to the engine (upstream/upstream.h), the supervisor's probes
// (engine/health_probe.h) and the benchmarks' client (bench/http_client.h).
//
// Every client is made with explicit time-outs (httplib's defaults wait minutes for a
// connection and forever for nothing else), keep-alive off unless asked for, and the key
// the server expects sent as a bearer token on every request, including requests sent
// with Client::send().
//
// Thread-safety: make_client is stateless; a client is for one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace httplib {
class Client;
}

namespace kvgate::http {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds read_timeout{60000};  // the silence accepted while an answer is awaited
  std::chrono::milliseconds write_timeout{60000};
  bool keep_alive = false;   // reuse the connection for the client's next request
  bool tcp_nodelay = false;  // no Nagle delay between a request's head and its body
  std::string bearer_token;  // sent as "Authorization: Bearer …" when not empty
};

std::unique_ptr<httplib::Client> make_client(const std::string& host, uint16_t port, const ClientOptions& options);

}  // namespace kvgate::http
