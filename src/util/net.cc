#include "util/net.h"

#include "util/socket.h"

namespace kvgate::util {

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  return addr;
}

}  // namespace

Result<uint16_t> pick_free_port() {
  const int fd = open_socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Error("socket: " + socket_error_text());
  sockaddr_in addr = loopback(0);
  if (::bind(native_socket(fd), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Error e("bind: " + socket_error_text());
    close_socket(fd);
    return e;
  }
  socklen_t len = sizeof addr;
  ::getsockname(native_socket(fd), reinterpret_cast<sockaddr*>(&addr), &len);
  close_socket(fd);
  return static_cast<uint16_t>(ntohs(addr.sin_port));
}

bool port_in_use(const std::string& host, uint16_t port) {
  sockaddr_in addr = loopback(port);
  const std::string h = host == "localhost" ? "127.0.0.1" : host == "0.0.0.0" ? "127.0.0.1" : host;
  init_sockets();
  if (::inet_pton(AF_INET, h.c_str(), &addr.sin_addr) != 1) return false;
  const int fd = open_socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  const bool connected = ::connect(native_socket(fd), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close_socket(fd);
  return connected;
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a{};
  init_sockets();
  if (::inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

}  // namespace kvgate::util
