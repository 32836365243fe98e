// FilteringProxy: an HTTP proxy on loopback in front of a real server that answers 404 for
// some paths, as a server without them would (e.g. an OpenAI-compatible server with no
// /apply-template or /tokenize), and passes everything else through unchanged (bodies
// buffered: for requests whose answers are not read as they stream). For end-to-end tests
// of what kvgate does when a server lacks an endpoint, with the real engine behind.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace kvgate::testing {

class FilteringProxy {
 public:
  // Listens on a free loopback port; forwards to 127.0.0.1:`target_port` all but `blocked`.
  FilteringProxy(uint16_t target_port, std::set<std::string> blocked);
  ~FilteringProxy();
  FilteringProxy(const FilteringProxy&) = delete;
  FilteringProxy& operator=(const FilteringProxy&) = delete;

  uint16_t port() const { return port_; }
  // Requests seen for `path` (blocked ones included).
  int hits(const std::string& path) const;

 private:
  uint16_t target_port_;
  std::set<std::string> blocked_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, int> hits_;  // guarded by mu_
};

}  // namespace kvgate::testing
