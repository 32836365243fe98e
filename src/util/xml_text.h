// Text and attribute values for XML (SVG charts, Windows task files): the five special
// characters as entities, and control characters, which XML 1.0 does not allow, as spaces.
#pragma once

#include <string>
#include <string_view>

namespace kvgate::util {

std::string xml_escape(std::string_view text);

}  // namespace kvgate::util
