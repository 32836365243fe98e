#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "util/socket.h"

namespace kvgate::util {

void init_sockets() {}

int open_socket(int family, int type, int protocol) {
  return ::socket(family, type | SOCK_CLOEXEC, protocol);
}

int accept_socket(int listen_fd, sockaddr* addr, socklen_t* len) {
  return ::accept4(listen_fd, addr, len, SOCK_CLOEXEC);
}

void close_socket(int fd) { ::close(fd); }

int poll_sockets(pollfd* fds, size_t n, int timeout_ms) { return ::poll(fds, n, timeout_ms); }

pollfd poll_entry(int fd, short events) { return pollfd{fd, events, 0}; }

long send_bytes(int fd, const void* data, size_t size, bool dont_wait) {
  return ::send(fd, data, size, MSG_NOSIGNAL | (dont_wait ? MSG_DONTWAIT : 0));
}

long recv_bytes(int fd, void* data, size_t size, bool peek, bool dont_wait) {
  return ::recv(fd, data, size, (peek ? MSG_PEEK : 0) | (dont_wait ? MSG_DONTWAIT : 0));
}

bool socket_would_block() { return errno == EAGAIN || errno == EWOULDBLOCK; }
bool socket_interrupted() { return errno == EINTR; }
bool socket_address_in_use() { return errno == EADDRINUSE; }
std::string socket_error_text() { return std::strerror(errno); }

}  // namespace kvgate::util
