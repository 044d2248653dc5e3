// Owns the nats-server config text (server_config.hpp).
#include "bus/server_config.hpp"

#include <nlohmann/json.hpp>

namespace troupe::bus {

namespace {

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump();
}

std::string loopback(int port) {
  return quoted("127.0.0.1:" + std::to_string(port));
}

}  // namespace

std::string server_config(const ServerConfig& c) {
  std::string t;
  if (!c.comment.empty()) t += "# " + c.comment + "\n";
  t += "listen: 127.0.0.1:" + std::to_string(c.port) + "\n";
  t += "jetstream { store_dir: " + quoted(c.store_dir) + " }\n";
  if (c.route_ports.size() > 1) {
    std::string routes;
    for (size_t i = 0; i < c.route_ports.size(); ++i)
      routes +=
          (i == 0 ? "" : ", ") + quoted("nats://127.0.0.1:" + std::to_string(c.route_ports[i]));
    t += "server_name: s" + std::to_string(c.index) + "\n";
    t += "cluster { name: " + quoted(c.cluster_name) +
         ", listen: " + loopback(c.route_ports.at(c.index)) + ", routes: [" + routes + "] }\n";
  }
  if (c.leaf_port > 0 || !c.leaf_remotes.empty()) {
    std::string parts;
    if (c.leaf_port > 0) {
      parts += "listen: " + loopback(c.leaf_port);
      if (!c.leaf_advertise.empty()) parts += ", advertise: " + quoted(c.leaf_advertise);
      if (!c.tls_cert.empty())
        parts +=
            ", tls { cert_file: " + quoted(c.tls_cert) + ", key_file: " + quoted(c.tls_key) + " }";
    }
    if (!c.leaf_remotes.empty()) {
      parts += std::string(parts.empty() ? "" : ",") + " remotes: [\n";
      for (const auto& r : c.leaf_remotes) {
        parts += "  { urls: [" + quoted(r.url) + "], account: " + quoted(r.account);
        if (!r.creds.empty()) parts += ", credentials: " + quoted(r.creds);
        if (!r.ca.empty()) parts += ", tls { ca_file: " + quoted(r.ca) + " }";
        parts += " }\n";
      }
      parts += "]";
    }
    t += "leafnodes { " + parts + " }\n";
  }
  if (!c.include.empty()) t += "include " + quoted(c.include) + "\n";
  return t;
}

}  // namespace troupe::bus
