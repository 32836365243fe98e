// The status page's files, embedded in the binary at build time (cmake/embed_assets.cmake):
//   status.html    the page (src/gateway/web/status.html)
//   status.js      its script (src/gateway/web/status.js)
//   chart.min.js   Chart.js 3.9, MIT licence, from Debian's libjs-chart.js
//                  (/usr/share/javascript/chart.js/chart.min.js)
// Each is kept as is and gzip-compressed (gzip -9 -n), for clients that accept gzip.
#pragma once

#include <string_view>

namespace kvgate::gateway {

struct WebAsset {
  std::string_view name;
  std::string_view raw;
  std::string_view gzip;
};

// nullptr: no such asset.
// The Content-Type of an asset, from its name's extension.
std::string_view content_type_of(std::string_view name);
const WebAsset* find_web_asset(std::string_view name);

}  // namespace kvgate::gateway
