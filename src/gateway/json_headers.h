// The header list of every JSON answer the gateway sends (Content-Type: application/json).
// Routes that add headers (Retry-After, session ids) copy it and append.
#pragma once

#include "http/http_server.h"

namespace kvgate::gateway {

inline const http::HeaderList kJsonHeaders = {{"Content-Type", "application/json"}};

}  // namespace kvgate::gateway
