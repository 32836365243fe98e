// Small socket helpers.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.h"

namespace kvgate::util {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
// Another process may take it before the caller binds; callers that launch a server on it
// must treat "address in use" as retryable.
Result<uint16_t> pick_free_port();

// True if something accepts TCP connections on host:port right now.
bool port_in_use(const std::string& host, uint16_t port);

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

}  // namespace kvgate::util
