// troupe-gateway's HTTP server (docs/http.md): the routes of http_api.hpp
// over cpp-httplib, each a stateless translation to one NATS API request
// made with the gateway's own identity for the team of the caller's bearer
// token (looked up by its SHA-256 in the token bucket, cached briefly), plus
// the web console's files. Several gateways can run behind a load balancer:
// none keeps a session of its own (the console's cookie is the token).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bus/nats.hpp"

namespace troupe::gateway::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 4280;  // 0: a free port (see Server::port)
  bus::ConnectOptions nats;
  int request_timeout_ms = 5000;
  // How long a token's grant (or its absence) is trusted before the bucket is
  // read again: a revoked token stops working within this time.
  int token_cache_ms = 10000;
  // Largest request body (a job spec): bigger ones get 413.
  std::size_t max_body_bytes = 1 << 20;
  // Event streams (/v1/events) and followed logs open at once: per team (an
  // admin token counts as its own), and in all; each holds one of the
  // server's 128 threads, so the whole stays below them and every other
  // request still gets one. Past either: 429 too_many_streams.
  int max_streams_per_team = 32;
  int max_streams = 96;
};

class Server {
 public:
  // Connects to NATS and binds the port; nullptr and `error` when either fails.
  static std::unique_ptr<Server> open(const ServerOptions& o, std::string* error);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  // Serves until stop() (from another thread or a signal watcher).
  void run();
  void stop();

 private:
  Server();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::gateway::http
