// Sockets on POSIX and Windows behind one small set of calls (socket_posix.cc,
// socket_windows.cc). A socket is an `int` on both: Winsock's SOCKET handles are kernel
// handles, whose values fit in 32 bits (Windows keeps them so for 32-bit interop), so the
// HTTP server and clients keep one type. Includes the platform's socket headers.
#pragma once

#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#endif

#include <cstddef>
#include <string>

namespace kvgate::util {

#ifdef _WIN32
using socklen_t = int;
inline constexpr int kShutRead = SD_RECEIVE, kShutWrite = SD_SEND, kShutBoth = SD_BOTH;
inline constexpr short kPollReadHangup = 0;  // Windows reports a closed peer as POLLHUP
#else
using socklen_t = ::socklen_t;
inline constexpr int kShutRead = SHUT_RD, kShutWrite = SHUT_WR, kShutBoth = SHUT_RDWR;
inline constexpr short kPollReadHangup = POLLRDHUP;
#endif

// The platform's handle of `fd`, for the calls that are the same on both (bind, listen,
// connect, getsockname, setsockopt, shutdown).
#ifdef _WIN32
inline SOCKET native_socket(int fd) { return static_cast<SOCKET>(static_cast<unsigned int>(fd)); }
#else
inline int native_socket(int fd) { return fd; }
#endif

// Starts the platform's socket library once (Windows: WSAStartup); safe from any thread.
void init_sockets();

// A new TCP socket, not inherited by child processes; -1 on error (socket_error_text()).
int open_socket(int family, int type, int protocol);
// The next connection on `listen_fd` (not inherited by children), or -1.
int accept_socket(int listen_fd, sockaddr* addr, socklen_t* len);
void close_socket(int fd);

// poll(2) / WSAPoll on `n` entries.
int poll_sockets(pollfd* fds, size_t n, int timeout_ms);
pollfd poll_entry(int fd, short events);

// send(2)/recv(2) without SIGPIPE; `dont_wait` returns at once when the call would block.
long send_bytes(int fd, const void* data, size_t size, bool dont_wait);
long recv_bytes(int fd, void* data, size_t size, bool peek = false, bool dont_wait = false);

// What the last failed socket call of this thread said.
bool socket_would_block();     // EAGAIN / EWOULDBLOCK / WSAEWOULDBLOCK
bool socket_interrupted();     // EINTR / WSAEINTR
bool socket_address_in_use();  // EADDRINUSE / WSAEADDRINUSE
std::string socket_error_text();

}  // namespace kvgate::util
