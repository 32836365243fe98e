// One Server-Sent Event as both adapters write it: "event: NAME\ndata: JSON\n\n".
#pragma once

#include <string>
#include <string_view>

#include "util/json.h"
#include "wire/wire_error.h"

namespace kvgate::wire {

inline std::string sse_event(std::string_view name, const ClientJson& data) {
  std::string out = "event: ";
  out += name;
  out += "\ndata: ";
  out += util::json_text(data);
  out += "\n\n";
  return out;
}

}  // namespace kvgate::wire
