// messages/event_json: the direct writer of job events writes byte for byte
// what protobuf's JSON printer (spec::to_json) writes, and the direct reader
// reads what protobuf's parser reads (or leaves it to that parser).
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "messages/event_json.hpp"
#include "messages/spec.hpp"

using namespace troupe;

namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// Every code point but the surrogates, UTF-8, in blocks of 4,096.
std::vector<std::string> code_point_blocks() {
  std::vector<std::string> out;
  for (uint32_t from = 0; from <= 0x10ffff; from += 0x1000) {
    std::string s;
    for (uint32_t cp = from; cp < from + 0x1000 && cp <= 0x10ffff; ++cp)
      if ((cp & 0xfffff800) != 0xd800) s += utf8(cp);
    out.push_back(std::move(s));
  }
  return out;
}

// Code points at and around the edges of protobuf's escape ranges.
const std::vector<uint32_t> kEdges = {
    0x00,    0x08,    0x09,    0x0a,    0x0b,    0x0c,    0x0d,    0x1f,    0x20,    0x22,
    0x26,    0x27,    0x2f,    0x3c,    0x3e,    0x5c,    0x7e,    0x7f,    0x80,    0x9f,
    0xa0,    0xac,    0xad,    0xae,    0x5ff,   0x600,   0x603,   0x604,   0x6dc,   0x6dd,
    0x6de,   0x70f,   0x17b3,  0x17b4,  0x17b5,  0x17b6,  0x200a,  0x200b,  0x200f,  0x2010,
    0x2027,  0x2028,  0x2029,  0x202e,  0x202f,  0x205f,  0x2060,  0x2064,  0x2065,  0x2069,
    0x206a,  0x206f,  0x2070,  0xd7ff,  0xe000,  0xfefe,  0xfeff,  0xfff8,  0xfff9,  0xfffb,
    0xfffc,  0xffff,  0x10000, 0x1d172, 0x1d173, 0x1d17a, 0x1d17b, 0x1f600, 0xe0000, 0xe0001,
    0xe0002, 0xe001f, 0xe0020, 0xe007f, 0xe0080, 0x10ffff};

// A string of random pieces: plain ASCII, JSON-special characters, edge and
// random code points, and bytes that are not valid UTF-8 (stray continuation
// bytes, cut sequences, surrogates, overlong forms, code points past U+10FFFF).
std::string random_string(std::mt19937_64& rng) {
  static const std::vector<std::string> kBad = {"\x80",
                                                "\xbf",
                                                "\xc3",
                                                "\xe2\x80",
                                                "\xf0\x9f\x98",
                                                "\xf8\x88\x80\x80",
                                                "\xff",
                                                "\xed\xa0\x80",
                                                "\xc0\x80",
                                                "\xc1\xbf",
                                                "\xe0\x80\xa2",
                                                "\xf4\x90\x80\x80",
                                                "\xf7\xbf\xbf\xbf",
                                                "\xc3\xc3",
                                                "\xe2\x28\xa1"};
  std::uniform_int_distribution<int> len(0, 24), kind(0, 9);
  std::string s;
  for (int n = len(rng); n > 0; --n) {
    switch (kind(rng)) {
      case 0:
      case 1:
      case 2:
        s += static_cast<char>(std::uniform_int_distribution<int>(0x20, 0x7e)(rng));
        break;
      case 3:
        s += "\"\\<>&/'"[std::uniform_int_distribution<int>(0, 6)(rng)];
        break;
      case 4:
        s += static_cast<char>(std::uniform_int_distribution<int>(0, 0x1f)(rng));
        break;
      case 5:
        s += utf8(kEdges[std::uniform_int_distribution<size_t>(0, kEdges.size() - 1)(rng)]);
        break;
      case 6: {
        uint32_t cp = std::uniform_int_distribution<uint32_t>(0x80, 0x10ffff)(rng);
        if ((cp & 0xfffff800) != 0xd800) s += utf8(cp);
        break;
      }
      case 7:
        s += kBad[std::uniform_int_distribution<size_t>(0, kBad.size() - 1)(rng)];
        break;
      case 8:
        s += static_cast<char>(std::uniform_int_distribution<int>(0x80, 0xff)(rng));
        break;
      default:
        s += utf8(std::uniform_int_distribution<uint32_t>(0x80, 0x7ff)(rng));
    }
  }
  return s;
}

pb::JobEvent random_event(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> coin(0, 1), small(0, 4);
  auto i32 = [&] {
    switch (small(rng)) {
      case 0:
        return 0;
      case 1:
        return std::numeric_limits<int32_t>::min();
      case 2:
        return std::numeric_limits<int32_t>::max();
      default:
        return std::uniform_int_distribution<int32_t>(-1000, 100000)(rng);
    }
  };
  auto i64 = [&] {
    switch (small(rng)) {
      case 0:
        return int64_t{0};
      case 1:
        return std::numeric_limits<int64_t>::min();
      case 2:
        return std::numeric_limits<int64_t>::max();
      default:
        return std::uniform_int_distribution<int64_t>(-(int64_t{1} << 53), int64_t{1} << 62)(rng);
    }
  };
  auto str = [&] { return coin(rng) ? std::string() : random_string(rng); };
  pb::JobEvent e;
  e.set_job_id(str());
  e.set_team(str());
  e.set_state(str());
  e.set_attempt(i32());
  e.set_ts_ms(i64());
  e.set_ts(str());
  for (int w = small(rng); w > 0; --w) {
    auto* p = e.add_workers();
    p->set_rank(i32());
    p->set_node(str());
    for (int g = small(rng); g > 0; --g) p->add_gpus(i32());
  }
  if (coin(rng)) e.set_exit_code(i32());
  e.set_reason(str());
  e.set_name(str());
  e.set_kind(str());
  e.set_cause(str());
  e.set_seq(i64());
  return e;
}

}  // namespace

TEST_CASE("event_json: an empty event is every field at its default", "[spec][event_json]") {
  pb::JobEvent e;
  CHECK(spec::event_json(e) == spec::to_json(e));
  CHECK(spec::event_json(e) ==
        R"({"job_id":"","team":"","state":"","attempt":0,"ts_ms":"0","ts":"","workers":[],)"
        R"("reason":"","name":"","kind":"","cause":"","seq":"0","tasks":0})");
}

TEST_CASE("event_json: a fully populated event", "[spec][event_json]") {
  pb::JobEvent e;
  e.set_job_id("j-00000042");
  e.set_team("nlp");
  e.set_state("succeeded");
  e.set_attempt(3);
  e.set_ts_ms(1722000000123);
  e.set_ts("2024-07-26T13:20:00.123Z");
  for (int r = 0; r < 3; ++r) {
    auto* w = e.add_workers();
    w->set_rank(r);
    w->set_node("node-" + std::to_string(r));
    for (int g = 0; g < r + 1; ++g) w->add_gpus(g);
  }
  e.add_workers();  // a worker with every field at its default
  e.set_reason("exited <0> & \"done\"\n");
  e.set_name("bert-large \xc3\xa9\xe2\x80\xa8");
  e.set_kind("training");
  e.set_cause("exit");
  e.set_seq(std::numeric_limits<int64_t>::max());

  SECTION("exit code 0: set, so written (last, as protobuf writes it)") {
    e.set_exit_code(0);
    CHECK(spec::event_json(e) == spec::to_json(e));
    CHECK(spec::event_json(e).substr(spec::event_json(e).size() - 15) == ",\"exit_code\":0}");
  }
  SECTION("a negative exit code and a negative int64") {
    e.set_exit_code(-9);
    e.set_ts_ms(std::numeric_limits<int64_t>::min());
    CHECK(spec::event_json(e) == spec::to_json(e));
  }
  SECTION("no exit code: left out") {
    CHECK(spec::event_json(e) == spec::to_json(e));
    CHECK(spec::event_json(e).find("exit_code") == std::string::npos);
  }
}

TEST_CASE("event_json: every code point is escaped or kept as protobuf does",
          "[spec][event_json]") {
  pb::JobEvent e;
  for (const auto& s : code_point_blocks()) {
    e.set_name(s);
    REQUIRE(spec::event_json(e) == spec::to_json(e));
  }
}

TEST_CASE("event_json: byte strings that are not UTF-8 are dropped as protobuf drops them",
          "[spec][event_json]") {
  google::protobuf::LogSilencer quiet;  // protobuf logs each invalid string it serializes
  pb::JobEvent e;
  SECTION("every two-byte string, alone and followed by text") {
    for (int a = 0; a < 256; ++a) {
      for (int b = 0; b < 256; ++b) {
        std::string s{static_cast<char>(a), static_cast<char>(b)};
        e.set_reason(s);
        e.set_cause(s + "x\xc3\xa9y");
        REQUIRE(spec::event_json(e) == spec::to_json(e));
      }
    }
  }
  SECTION("lead bytes followed by every byte, in three- and four-byte sequences") {
    for (int lead : {0xe0, 0xe2, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xf7}) {
      for (int b = 0; b < 256; ++b) {
        std::string s{static_cast<char>(lead), '\x80', static_cast<char>(b), '"'};
        std::string t{static_cast<char>(lead), '\x90', '\x80', static_cast<char>(b), 'z'};
        e.set_reason(s);
        e.set_cause(t);
        REQUIRE(spec::event_json(e) == spec::to_json(e));
      }
    }
  }
}

TEST_CASE("event_json: random events are written as protobuf writes them (property)",
          "[spec][event_json]") {
  google::protobuf::LogSilencer quiet;
  std::mt19937_64 rng(20240726);
  for (int i = 0; i < 2000; ++i) {
    const auto e = random_event(rng);
    const auto want = spec::to_json(e);
    const auto got = spec::event_json(e);
    if (got != want) FAIL_CHECK("event " << i << ": " << e.ShortDebugString());
    REQUIRE(got == want);
  }
}

// --- the reader ------------------------------------------------------------------

namespace {

// What protobuf's parser makes of `json` (unknown fields ignored), or nothing.
std::optional<pb::JobEvent> slow_read(const std::string& json) {
  pb::JobEvent e;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(json, &e, o).ok()) return std::nullopt;
  return e;
}

bool same(const pb::JobEvent& a, const pb::JobEvent& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

}  // namespace

TEST_CASE(
    "read_event_json: the fast path reads every written event as protobuf reads it "
    "(property)",
    "[spec][event_json]") {
  google::protobuf::LogSilencer quiet;
  std::mt19937_64 rng(20261202);
  int unreadable = 0;
  for (int i = 0; i < 2000; ++i) {
    const auto json = spec::event_json(random_event(rng));
    pb::JobEvent fast;
    const auto slow = slow_read(json);
    const bool took = spec::read_event_json_fast(json, &fast);
    if (!slow) {
      // Bytes protobuf's printer passes on but its parser refuses (overlong
      // UTF-8 forms): neither path reads them.
      ++unreadable;
      REQUIRE_FALSE(took);
      continue;
    }
    if (!took) FAIL_CHECK("event " << i << ": " << json);
    REQUIRE(same(fast, *slow));
  }
  CHECK(unreadable < 200);
}

TEST_CASE("read_event_json: every code point, escaped or not, reads back as protobuf reads it",
          "[spec][event_json]") {
  pb::JobEvent e;
  for (const auto& s : code_point_blocks()) {
    e.set_name(s);
    const auto json = spec::event_json(e);
    pb::JobEvent fast;
    REQUIRE(spec::read_event_json_fast(json, &fast));
    CHECK(fast.name() == s);
    REQUIRE(same(fast, *slow_read(json)));
  }
}

TEST_CASE(
    "read_event_json: a damaged event is never read otherwise than protobuf reads it "
    "(property)",
    "[spec][event_json]") {
  google::protobuf::LogSilencer quiet;
  std::mt19937_64 rng(42);
  const std::string bytes = "\"\\,:{}[]0123456789-+ eEu/x\x7f\x80\xc3\xa9\xed\xf4";
  std::uniform_int_distribution<size_t> pick(0, bytes.size() - 1);
  int fast_taken = 0, fallbacks = 0;
  for (int i = 0; i < 20000; ++i) {
    auto json = spec::event_json(random_event(rng));
    const int edits = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int k = 0; k < edits && !json.empty(); ++k) {
      const size_t at = std::uniform_int_distribution<size_t>(0, json.size() - 1)(rng);
      switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
        case 0:
          json[at] = bytes[pick(rng)];
          break;
        case 1:
          json.erase(at, 1);
          break;
        case 2:
          json.insert(at, 1, bytes[pick(rng)]);
          break;
        default:
          json.resize(at);
      }
    }
    pb::JobEvent fast, both;
    const auto slow = slow_read(json);
    const bool took = spec::read_event_json_fast(json, &fast);
    if (took) {
      ++fast_taken;
      if (!slow || !same(fast, *slow)) FAIL_CHECK("damaged event " << i << ": " << json);
      REQUIRE(slow);
      REQUIRE(same(fast, *slow));
    } else {
      ++fallbacks;
    }
    REQUIRE(spec::read_event_json(json, &both) == static_cast<bool>(slow));
    if (slow) REQUIRE(same(both, *slow));
  }
  // Both paths were exercised: some damage keeps the shape (a digit for a
  // digit, a letter in a string), most breaks it.
  CHECK(fast_taken > 100);
  CHECK(fallbacks > 100);
}

TEST_CASE("read_event_json: other shapes of an event go to protobuf's parser",
          "[spec][event_json]") {
  pb::JobEvent want;
  want.set_job_id("j-1");
  want.set_team("nlp");
  want.set_state("running");
  want.set_ts_ms(12);
  want.set_seq(3);
  for (const std::string json : {
           R"({"job_id": "j-1", "team": "nlp", "state": "running", "ts_ms": "12", "seq": "3"})",
           R"({"seq":"3","state":"running","team":"nlp","job_id":"j-1","ts_ms":12})",
           R"({"jobId":"j-1","team":"nlp","state":"running","tsMs":"12","seq":3,"future":[1]})",
           R"({"job_id":"j-1","team":"n\u006cp","state":"running","ts_ms":"12","seq":"3"})",
       }) {
    pb::JobEvent fast, got;
    CHECK_FALSE(spec::read_event_json_fast(json, &fast));
    REQUIRE(spec::read_event_json(json, &got));
    CHECK(same(got, want));
  }
  pb::JobEvent got;
  CHECK_FALSE(spec::read_event_json("{\"job_id\":", &got));
  CHECK_FALSE(spec::read_event_json("", &got));
  CHECK_FALSE(spec::read_event_json("[]", &got));
}
