// troupe-gateway's entry point: the HTTP/JSON API and the web console
// (docs/http.md) in front of the NATS API. Parses flags, finds its identity
// (gateway.creds and the CA of a `troupe up` home unless given), serves until
// SIGTERM/SIGINT (received through a signalfd; no handler).
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "gateway/auth/store.hpp"
#include "gateway/client.hpp"
#include "gateway/http_server.hpp"
#include "gateway/process.hpp"

namespace {

namespace gw = troupe::gateway;

// "HOST:PORT" or ":PORT" or "PORT".
bool parse_listen(const std::string& text, std::string* host, int* port) {
  auto colon = text.rfind(':');
  std::string h = colon == std::string::npos ? std::string() : text.substr(0, colon);
  std::string p = colon == std::string::npos ? text : text.substr(colon + 1);
  if (p.empty()) return false;
  char* end = nullptr;
  long v = std::strtol(p.c_str(), &end, 10);
  if (*end != '\0' || v < 0 || v > 65535) return false;
  if (!h.empty()) *host = h;
  *port = static_cast<int>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe-gateway: Troupe's HTTP/JSON API and web console"};
  app.set_version_flag("--version", TROUPE_VERSION);
  std::string listen = "127.0.0.1:4280";
  std::string nats_url = gw::kDefaultNatsUrl;
  std::string creds, tls_ca, home, port_file;
  int token_cache_ms = 10000;
  bool insecure = false;
  app.add_option("--listen", listen, "HOST:PORT to serve on (PORT 0: a free one)")
      ->capture_default_str();
  app.add_option("--nats", nats_url, "NATS URL(s), comma-separated")->capture_default_str();
  app.add_option("--creds", creds,
                 "the gateway's NATS identity (default: HOME/auth/gateway.creds)");
  app.add_option("--tls-ca", tls_ca, "CA of the NATS server (default: HOME/auth/ca.pem)");
  app.add_option("--home", home, "a `troupe up` home to find the identity in");
  app.add_flag("--insecure", insecure, "connect to NATS without identity or TLS");
  app.add_option("--port-file", port_file, "write the port served on to this file once listening");
  app.add_option("--token-cache-ms", token_cache_ms,
                 "how long a token's grant is trusted before it is read again")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  gw::http::ServerOptions o;
  app.add_option("--max-streams-per-team", o.max_streams_per_team,
                 "event streams and followed logs one team (or admin token) may hold open; "
                 "more get 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--max-streams", o.max_streams,
                 "event streams and followed logs open at once in all (each holds one of the "
                 "gateway's 128 threads); more get 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 120));
  CLI11_PARSE(app, argc, argv);

  if (!parse_listen(listen, &o.host, &o.port)) {
    std::cerr << "troupe-gateway: --listen " << listen << " is not HOST:PORT\n";
    return 2;
  }
  o.token_cache_ms = token_cache_ms;
  o.nats.url = nats_url;
  o.nats.name = "troupe-gateway";
  o.nats.max_reconnect = -1;
  if (!insecure) {
    std::string why;
    if (!troupe::auth::daemon_identity(home, std::string(troupe::subjects::kGatewayIdentity),
                                       &creds, &tls_ca, &why)) {
      std::cerr << "troupe-gateway: " << why
                << " (troupe auth add-gateway, or --insecure for an open cluster)\n";
      return 2;
    }
    o.nats.creds_file = creds;
    o.nats.tls_ca = tls_ca;
  }

  gw::SignalWatch signals;  // before any thread
  troupe::bus::Library lib;
  std::string error;
  auto server = gw::http::Server::open(o, &error);
  if (!server) {
    std::cerr << "troupe-gateway: " << error << "\n";
    return 1;
  }
  std::thread serving([&] { server->run(); });
  if (!port_file.empty()) {
    std::ofstream f(port_file + ".tmp");
    f << server->port() << "\n";
    f.close();
    std::filesystem::rename(port_file + ".tmp", port_file);
  }
  std::cout << "troupe-gateway: listening on http://" << o.host << ":" << server->port() << "/"
            << std::endl;
  while (signals.wait(std::chrono::milliseconds(1000)) == 0) {
  }
  server->stop();
  serving.join();
  server.reset();
  return 0;
}
