// Owns the text of the nats-server configs Troupe writes for local servers
// (`troupe up`, `troupe up --nats-cluster N`, `troupe up --clusters N`, the
// integration harness): client port, JetStream store, routes of a cluster
// on loopback, leaf node listener and remotes, the auth include. Pure: no
// NATS header (nats-server reads the text).
#pragma once

#include <string>
#include <vector>

namespace troupe::bus {

// A front door's leaf node link to one cluster (docs/clusters.md), bound to
// the cluster's link account on this server.
struct LeafRemote {
  std::string url;      // the cluster's leaf node listener
  std::string account;  // the link account's public key (or name)
  std::string creds;    // what the link signs in with ("": none)
  std::string ca;       // the CA the cluster's certificate is checked with ("": none)
};

struct ServerConfig {
  std::string comment;    // a first line, "# ..." ("": none)
  int port = 0;           // client port on 127.0.0.1
  std::string store_dir;  // JetStream's store
  // A member of a cluster of servers on loopback (routes), when
  // route_ports holds more than one port: this server is route_ports[index].
  std::string cluster_name;
  std::vector<int> route_ports;
  size_t index = 0;               // also its name, s<index>
  int leaf_port = 0;              // accepts leaf node links (0: none)
  std::string leaf_advertise;     // the address links learn ("": the listener's)
  std::string tls_cert, tls_key;  // TLS of the leaf listener ("": none)
  std::vector<LeafRemote> leaf_remotes;
  std::string include;  // a file included, relative to the config's folder ("": none)
};

// The config text. Paths and names are written as JSON strings (quoted and
// escaped), which nats-server's config format reads.
std::string server_config(const ServerConfig& c);

}  // namespace troupe::bus
