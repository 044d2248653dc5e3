// Unit tests of the node agent's logs request handler (files in a temp dir).
#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "messages/log_chunks.hpp"
#include "node/launch_spec.hpp"
#include "node/logs.hpp"
#include "node/test_support.hpp"

using namespace troupe::node;
using nlohmann::json;
using troupe::node::test::TempDir;

namespace {
json ask(const std::string& dir, const json& req) {
  return json::parse(handle_logs_request(dir, req.dump()));
}
}  // namespace

TEST_CASE("node logs: offsets, eof, size, max_bytes", "[node][logs]") {
  TempDir tmp;
  test::write_file(log_path(tmp.path(), WorkerKey{"j-1", 0, 0}), "hello world\n");

  auto r = ask(tmp.path(), {{"job_id", "j-1"}, {"attempt", 0}, {"rank", 0}});
  CHECK(r["data"] == "hello world\n");
  CHECK(r["offset"] == 12);
  CHECK(r["eof"] == true);
  CHECK(r["size"] == 12);

  r = ask(tmp.path(), {{"job_id", "j-1"}, {"attempt", 0}, {"offset", 6}, {"max_bytes", 3}});
  CHECK(r["data"] == "wor");
  CHECK(r["offset"] == 9);
  CHECK(r["eof"] == false);

  r = ask(tmp.path(), {{"job_id", "j-1"}, {"offset", 100}});
  CHECK(r["data"] == "");
  CHECK(r["offset"] == 12);
  CHECK(r["eof"] == true);
}

TEST_CASE("node logs: max_bytes is capped at 1 MiB, default 64 KiB", "[node][logs]") {
  TempDir tmp;
  test::write_file(log_path(tmp.path(), WorkerKey{"j-big", 0, 0}), std::string(3 << 20, 'x'));
  auto r = ask(tmp.path(), {{"job_id", "j-big"}, {"attempt", 0}});
  CHECK(r["offset"] == 65536);
  r = ask(tmp.path(), {{"job_id", "j-big"}, {"attempt", 0}, {"max_bytes", 100 << 20}});
  CHECK(r["offset"] == (1 << 20));
  CHECK(r["size"] == (3 << 20));
  CHECK(r["eof"] == false);
}

TEST_CASE("node logs: latest attempt when none is given", "[node][logs]") {
  TempDir tmp;
  test::write_file(log_path(tmp.path(), WorkerKey{"j-2", 0, 1}), "first");
  test::write_file(log_path(tmp.path(), WorkerKey{"j-2", 10, 1}), "tenth");
  test::write_file(log_path(tmp.path(), WorkerKey{"j-2", 2, 1}), "second");
  test::write_file(log_path(tmp.path(), WorkerKey{"j-2", 11, 0}), "other rank");
  auto r = ask(tmp.path(), {{"job_id", "j-2"}, {"rank", 1}});
  CHECK(r["data"] == "tenth");
  r = ask(tmp.path(), {{"job_id", "j-2"}, {"rank", 1}, {"attempt", 2}});
  CHECK(r["data"] == "second");
}

TEST_CASE("node logs: errors", "[node][logs]") {
  TempDir tmp;
  auto r = ask(tmp.path(), {{"job_id", "j-none"}});
  REQUIRE(r.contains("error"));
  CHECK(r["error"].get<std::string>().rfind("no log for job j-none", 0) == 0);
  r = ask(tmp.path(), {{"job_id", "../../etc"}});
  CHECK(r["error"].get<std::string>().rfind("no log for job", 0) == 0);
  CHECK(ask(tmp.path(), {{"rank", 0}}).contains("error"));
  CHECK(ask(tmp.path(), {{"job_id", "j"}, {"rank", "zero"}}).contains("error"));
  CHECK(ask(tmp.path(), {{"job_id", "j"}, {"offset", -1}}).contains("error"));
  CHECK(json::parse(handle_logs_request(tmp.path(), "not json {")).contains("error"));
  CHECK(json::parse(handle_logs_request(tmp.path(), "[1,2]")).contains("error"));
  CHECK(json::parse(handle_logs_request(tmp.path(), "")).contains("error"));
}

TEST_CASE("logs request: the numbers the router and the agent read alike", "[node][logs]") {
  using troupe::logchunks::PageRequest;
  using troupe::logchunks::read_page_request;
  PageRequest p;
  REQUIRE(read_page_request(json::object(), &p) == "");
  CHECK(p.rank == 0);
  CHECK(p.offset == 0);
  CHECK(p.max_bytes == troupe::logchunks::kDefaultPageBytes);
  CHECK(p.attempt == -1);
  REQUIRE(read_page_request({{"rank", 3}, {"offset", 10}, {"max_bytes", 1 << 30}, {"attempt", 2}},
                            &p) == "");
  CHECK(p.rank == 3);
  CHECK(p.offset == 10);
  CHECK(p.max_bytes == troupe::logchunks::kMaxPageBytes);
  CHECK(p.attempt == 2);
  REQUIRE(read_page_request({{"max_bytes", -5}, {"attempt", int64_t{1} << 40}}, &p) == "");
  CHECK(p.max_bytes == troupe::logchunks::kDefaultPageBytes);
  CHECK(p.attempt == -1);
  REQUIRE(read_page_request({{"offset", 18446744073709551615ull}}, &p) == "");
  CHECK(p.offset == INT64_MAX);
  // Refused: a float (1e300 cast to an integer would be undefined
  // behaviour), a string, a negative offset, a rank out of range.
  for (const json& bad :
       {json{{"rank", 1e300}}, json{{"offset", 0.5}}, json{{"max_bytes", "9"}},
        json{{"offset", -1}}, json{{"rank", -1}}, json{{"rank", int64_t{1} << 31}}}) {
    INFO(bad.dump());
    CHECK_FALSE(read_page_request(bad, &p).empty());
  }
}

TEST_CASE("node logs: invalid UTF-8 and split characters", "[node][logs]") {
  TempDir tmp;
  // "a", an invalid byte, "b", then a euro sign (3 bytes).
  test::write_file(log_path(tmp.path(), WorkerKey{"j-u", 0, 0}),
                   "a\xff"
                   "b\xe2\x82\xac");
  std::string raw = handle_logs_request(tmp.path(), R"({"job_id":"j-u","attempt":0})");
  auto r = json::parse(raw);  // valid JSON despite the 0xff
  CHECK(r["size"] == 6);
  CHECK(r["offset"] == 6);
  CHECK(r["data"] ==
        "a\xef\xbf\xbd"
        "b\xe2\x82\xac");

  // A read that would end inside the euro sign stops before it.
  r = ask(tmp.path(), {{"job_id", "j-u"}, {"attempt", 0}, {"max_bytes", 4}});
  CHECK(r["offset"] == 3);
  r = ask(tmp.path(), {{"job_id", "j-u"}, {"attempt", 0}, {"offset", 3}, {"max_bytes", 4}});
  CHECK(r["data"] == "\xe2\x82\xac");
  CHECK(r["eof"] == true);
}

TEST_CASE("node logs: utf8_complete_prefix", "[node][logs]") {
  auto cut = [](const std::string& s) { return utf8_complete_prefix(s.data(), s.size()); };
  CHECK(cut("abc") == 3);
  CHECK(cut("ab\xe2\x82\xac") == 5);
  CHECK(cut("ab\xe2\x82") == 2);
  CHECK(cut("ab\xe2") == 2);
  CHECK(cut("\xe2\x82") == 2);  // nothing complete: keep it all
  CHECK(cut("a\xf0\x9f\x98") == 1);
  CHECK(cut("") == 0);
}
