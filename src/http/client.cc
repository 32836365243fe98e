#include "http/client.h"

#include <httplib.h>

namespace kvgate::http {

std::unique_ptr<httplib::Client> make_client(const std::string& host, uint16_t port, const ClientOptions& options) {
  auto client = std::make_unique<httplib::Client>(host, port);
  client->set_connection_timeout(options.connect_timeout);
  client->set_read_timeout(options.read_timeout);
  client->set_write_timeout(options.write_timeout);
  client->set_keep_alive(options.keep_alive);
  client->set_tcp_nodelay(options.tcp_nodelay);
  if (!options.bearer_token.empty()) client->set_bearer_token_auth(options.bearer_token.c_str());
  return client;
}

}  // namespace kvgate::http
