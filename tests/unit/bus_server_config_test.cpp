// Unit tests of the nats-server config text Troupe writes for local servers
// (bus/server_config.hpp): a single server, a cluster member's routes, the
// leaf node listener and remotes in one block, quoting.
#include <catch2/catch.hpp>
#include <string>

#include "bus/server_config.hpp"

using troupe::bus::LeafRemote;
using troupe::bus::server_config;
using troupe::bus::ServerConfig;

TEST_CASE("server config: one server, JetStream, the auth include", "[unit][bus]") {
  ServerConfig c;
  c.comment = "written by troupe up";
  c.port = 4222;
  c.store_dir = "/home/u/.troupe/nats";
  c.include = "auth/nats-auth.conf";
  CHECK(server_config(c) ==
        "# written by troupe up\n"
        "listen: 127.0.0.1:4222\n"
        "jetstream { store_dir: \"/home/u/.troupe/nats\" }\n"
        "include \"auth/nats-auth.conf\"\n");
  // One route port is no cluster.
  c.route_ports = {6222};
  CHECK(server_config(c).find("cluster") == std::string::npos);
}

TEST_CASE("server config: a cluster member routes to every member, and is named by its index",
          "[unit][bus]") {
  ServerConfig c;
  c.port = 4223;
  c.store_dir = "/s1";
  c.cluster_name = "troupe";
  c.route_ports = {6222, 6223, 6224};
  c.index = 1;
  const std::string t = server_config(c);
  CHECK(t.find("server_name: s1\n") != std::string::npos);
  CHECK(t.find("cluster { name: \"troupe\", listen: \"127.0.0.1:6223\", routes: "
               "[\"nats://127.0.0.1:6222\", \"nats://127.0.0.1:6223\", "
               "\"nats://127.0.0.1:6224\"] }\n") != std::string::npos);
  CHECK(t.find("leafnodes") == std::string::npos);
}

TEST_CASE(
    "server config: leaf node listener (TLS, advertise) and remotes share one block, paths "
    "are quoted",
    "[unit][bus]") {
  ServerConfig c;
  c.port = 4222;
  c.store_dir = "/a \"b\"";
  c.leaf_port = 7422;
  c.leaf_advertise = "127.0.0.1:9000";
  c.tls_cert = "/auth/cert.pem";
  c.tls_key = "/auth/key.pem";
  c.leaf_remotes = {LeafRemote{"tls://127.0.0.1:5315", "ACC1", "/c1/dispatch.creds", "/c1/ca.pem"},
                    LeafRemote{"nats://127.0.0.1:5325", "ACC2", "", ""}};
  const std::string t = server_config(c);
  CHECK(t.find("store_dir: \"/a \\\"b\\\"\"") != std::string::npos);
  CHECK(t.find("leafnodes { listen: \"127.0.0.1:7422\", advertise: \"127.0.0.1:9000\", tls { "
               "cert_file: \"/auth/cert.pem\", key_file: \"/auth/key.pem\" }, remotes: [\n"
               "  { urls: [\"tls://127.0.0.1:5315\"], account: \"ACC1\", credentials: "
               "\"/c1/dispatch.creds\", tls { ca_file: \"/c1/ca.pem\" } }\n"
               "  { urls: [\"nats://127.0.0.1:5325\"], account: \"ACC2\" }\n"
               "] }\n") != std::string::npos);
  // Exactly one leafnodes block (a second would replace the first).
  CHECK(t.find("leafnodes") == t.rfind("leafnodes"));
}
