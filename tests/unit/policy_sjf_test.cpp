// Shortest declared job first (actors/policy/sjf.hpp): the band of a job's
// declared work, and the config's `order: sjf` and `sjf:`.
#include <catch2/catch.hpp>
#include <limits>
#include <string>

#include "actors/policy/config.hpp"
#include "actors/policy/sjf.hpp"

using namespace troupe::policy;

namespace {
const std::string kPools = "pools: [{name: a100, gpu_type: a100}]\n";
}  // namespace

TEST_CASE("sjf bands: one GPU-second, then one band per doubling", "[policy][sjf]") {
  CHECK(sjf_band(1, 1) == 0);
  CHECK(sjf_band(2, 1) == 1);
  CHECK(sjf_band(3, 1) == 2);
  CHECK(sjf_band(4, 1) == 2);
  CHECK(sjf_band(5, 1) == 3);
  CHECK(sjf_band(60, 1) == 6);     // 32 < 60 <= 64
  CHECK(sjf_band(30, 2) == 6);     // the same 60 GPU-seconds
  CHECK(sjf_band(3600, 1) == 12);  // a GPU-hour: 2048 < 3600 <= 4096
  CHECK(sjf_band(3600, 8) == 15);  // 28,800: 16384 < 28800 <= 32768
  CHECK(sjf_band(60, 0) == 6);     // a job without GPUs counts one
  // More work is never in a lower band.
  int last = 0;
  for (int64_t s = 1; s < 10000000; s = s * 3 / 2 + 1) {
    int b = sjf_band(s, 4);
    CHECK(b >= last);
    last = b;
  }
}

TEST_CASE("sjf bands: no limit is the last band, huge limits saturate", "[policy][sjf]") {
  CHECK(sjf_band(0, 1) == kSjfUnknownBand);
  CHECK(sjf_band(-5, 8) == kSjfUnknownBand);
  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(sjf_band(big, big) == kSjfUnknownBand - 1);
  CHECK(sjf_band(big, 1) < kSjfUnknownBand);
}

TEST_CASE("config: order sjf and its starvation guard", "[policy][sjf][config]") {
  ClusterConfig c;
  REQUIRE(load_config(kPools + "teams: [{name: a, order: sjf}, {name: b, order: las}, {name: c}]\n"
                               "sjf: {promote_after_s: 7200}\n",
                      c) == "");
  CHECK(c.team("a")->sjf);
  CHECK_FALSE(c.team("a")->las);
  CHECK(c.team("b")->las);
  CHECK_FALSE(c.team("b")->sjf);
  CHECK_FALSE(c.team("c")->sjf);
  CHECK(c.sjf.promote_after_s == 7200);

  ClusterConfig d;
  REQUIRE(load_config(kPools + "teams: [{name: a, order: sjf}]\n", d) == "");
  CHECK(d.sjf.promote_after_s == 259200);  // 3 days

  ClusterConfig bad;
  CHECK(
      load_config(kPools + "teams: [{name: a, order: shortest}]\n", bad).find("fifo, las or sjf") !=
      std::string::npos);
  CHECK(load_config(kPools + "sjf: {promote_after_s: -1}\n", bad).find("promote_after_s") !=
        std::string::npos);
  CHECK(
      load_config(kPools + "sjf: {promote_after_s: 9223372036854775807}\n", bad).find("10 years") !=
      std::string::npos);
}

TEST_CASE("sjf bands: troupe why names a band by the work it stands for", "[policy][sjf]") {
  CHECK(sjf_band_text(0) == "band 0: declared work up to 1 GPU-seconds");
  CHECK(sjf_band_text(sjf_band(3600, 1)) == "band 12: declared work up to 4096 GPU-seconds");
  CHECK(sjf_band_text(kSjfUnknownBand - 1) ==
        "band 47: declared work up to 140737488355328 GPU-seconds");
  CHECK(sjf_band_text(kSjfUnknownBand) == "band 48: no max_runtime_s, the last band");
}
