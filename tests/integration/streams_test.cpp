// A stream's size bound on a server that cannot reserve it
// (bus::JetStream::ensure_stream_fitting), on a real nats-server whose
// JetStream may store 200 MiB: a bound of our own making is halved down to
// its floor, then the stream is made without one (events) or not at all
// (a team's logs); a bound the user gave is never changed.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "bus/nats.hpp"
#include "harness.hpp"
#include "load/host.hpp"

using namespace troupe;
using namespace troupe::it;

TEST_CASE(
    "a stream bound the server cannot reserve is halved to its floor, then dropped or refused",
    "[integration][streams]") {
  TmpDir tmp("troupe-it-streams");
  constexpr int64_t kMiB = 1024 * 1024;
  bus::ConnectionPtr conn;
  std::unique_ptr<Process> server;
  std::string err;
  for (int attempt = 0; attempt < 5 && !conn; ++attempt) {
    const int port = free_port();
    REQUIRE(port > 0);
    const std::string conf = tmp.file("nats.conf");
    std::ofstream(conf) << "listen: \"127.0.0.1:" << port << "\"\njetstream { store_dir: \""
                        << tmp.file("store") << "\", max_file_store: " << 200 * kMiB << " }\n";
    server = std::make_unique<Process>("nats-server",
                                       std::vector<std::string>{nats_server_path(), "-c", conf},
                                       tmp.file("nats.out"), tmp.file("nats.err"));
    bus::ConnectOptions o;
    o.url = "nats://127.0.0.1:" + std::to_string(port);
    o.timeout_ms = 1000;
    conn = load::connect_when_up(
        o, std::chrono::seconds(10), [&] { return server->running(); }, &err);
  }
  INFO("nats-server: " << err << "\n" << read_file(tmp.file("nats.err")));
  REQUIRE(conn);
  auto js = bus::JetStream::open(*conn, &err);
  REQUIRE(js);

  // 1 GiB does not fit in 200 MiB: 512, 256, then 128 MiB does.
  bus::StreamConfig events{"EVENTS", {"ev.>"}, 120000, 0, 1024 * kMiB};
  REQUIRE(js->ensure_stream_fitting(events, true, 64 * kMiB, true, &err));
  CHECK(events.max_bytes == 128 * kMiB);

  // A bound given by the user is not changed: refused.
  bus::StreamConfig given{"GIVEN", {"given.>"}, 120000, 0, 1024 * kMiB};
  CHECK_FALSE(js->ensure_stream_fitting(given, false, 64 * kMiB, true, &err));
  CHECK(err.find("insufficient storage") != std::string::npos);
  CHECK(given.max_bytes == 1024 * kMiB);

  // 72 MiB are left: with a 128 MiB floor, a logs stream is not made ...
  bus::StreamConfig logs{"LOGS", {"logs.>"}, 120000, 0, 512 * kMiB};
  CHECK_FALSE(js->ensure_stream_fitting(logs, true, 128 * kMiB, false, &err));
  CHECK(logs.max_bytes == 128 * kMiB);
  // ... and an events stream is made without a bound.
  bus::StreamConfig more{"MORE", {"more.>"}, 120000, 0, 512 * kMiB};
  REQUIRE(js->ensure_stream_fitting(more, true, 128 * kMiB, true, &err));
  CHECK(more.max_bytes == 0);
}
