#include <algorithm>
#include <climits>
#include <mutex>

#include <windows.h>

#include "util/socket.h"
#include "util/windows_error.h"

namespace kvgate::util {

namespace {

int descriptor(SOCKET s) { return s == INVALID_SOCKET ? -1 : static_cast<int>(s); }

int clamp_size(size_t size) { return static_cast<int>(std::min<size_t>(size, INT_MAX)); }

// A socket handle is inheritable by default: a child started with inherited handles (the
// engine, for its output pipe) would keep the port open after kvgate is gone.
int not_inherited(SOCKET s) {
  if (s != INVALID_SOCKET) ::SetHandleInformation(reinterpret_cast<HANDLE>(s), HANDLE_FLAG_INHERIT, 0);
  return descriptor(s);
}

// Winsock has no per-call "don't wait": the socket is switched to non-blocking for the call.
class NonBlockingFor {
 public:
  NonBlockingFor(int fd, bool on) : fd_(fd), on_(on) { set(1); }
  ~NonBlockingFor() { set(0); }
  NonBlockingFor(const NonBlockingFor&) = delete;
  NonBlockingFor& operator=(const NonBlockingFor&) = delete;

 private:
  void set(u_long mode) {
    if (on_) ::ioctlsocket(native_socket(fd_), static_cast<long>(FIONBIO), &mode);
  }
  int fd_;
  bool on_;
};

}  // namespace

void init_sockets() {
  static std::once_flag once;
  std::call_once(once, [] {
    WSADATA data{};
    ::WSAStartup(MAKEWORD(2, 2), &data);
  });
}

int open_socket(int family, int type, int protocol) {
  init_sockets();
  return not_inherited(
      ::WSASocketW(family, type, protocol, nullptr, 0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT));
}

int accept_socket(int listen_fd, sockaddr* addr, socklen_t* len) {
  return not_inherited(::accept(native_socket(listen_fd), addr, len));
}

void close_socket(int fd) { ::closesocket(native_socket(fd)); }

int poll_sockets(pollfd* fds, size_t n, int timeout_ms) {
  return ::WSAPoll(fds, static_cast<ULONG>(n), timeout_ms);
}

pollfd poll_entry(int fd, short events) {
  pollfd p{};
  p.fd = native_socket(fd);
  p.events = events;
  return p;
}

long send_bytes(int fd, const void* data, size_t size, bool dont_wait) {
  NonBlockingFor mode(fd, dont_wait);
  return ::send(native_socket(fd), static_cast<const char*>(data), clamp_size(size), 0);
}

long recv_bytes(int fd, void* data, size_t size, bool peek, bool dont_wait) {
  NonBlockingFor mode(fd, dont_wait);
  return ::recv(native_socket(fd), static_cast<char*>(data), clamp_size(size), peek ? MSG_PEEK : 0);
}

bool socket_would_block() { return ::WSAGetLastError() == WSAEWOULDBLOCK; }
bool socket_interrupted() { return ::WSAGetLastError() == WSAEINTR; }
bool socket_address_in_use() { return ::WSAGetLastError() == WSAEADDRINUSE; }
std::string socket_error_text() {
  return windows_error_text(static_cast<unsigned long>(::WSAGetLastError()));
}

}  // namespace kvgate::util
