// The web console's files (gateway/console/), embedded into troupe-gateway
// at build time (gateway/embed_console.cmake writes console_assets.cpp), so
// the binary serves them without a folder beside it and nothing is fetched.
#pragma once

#include <string>
#include <vector>

namespace troupe::gateway::http {

struct Asset {
  std::string path;  // file name: index.html, app.js, ...
  std::string mime;
  std::string body;
};
const std::vector<Asset>& console_assets();

}  // namespace troupe::gateway::http
