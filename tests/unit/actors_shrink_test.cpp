// shrink_if_sparse (actors/shrink.hpp): a per-job table gives its buckets
// back once a burst has left it, and is left alone while it is in use.
#include <catch2/catch.hpp>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "actors/shrink.hpp"

TEST_CASE("shrink_if_sparse: a table emptied after a burst gives its buckets back",
          "[actors][shrink]") {
  std::unordered_map<std::string, int> t;
  for (int i = 0; i < 100000; ++i) t.emplace("j-" + std::to_string(i), i);
  const auto peak = t.bucket_count();
  REQUIRE(peak >= 100000);
  // Erased as jobs end, with the check after each erase (as the actors do).
  for (int i = 0; i < 99990; ++i) {
    t.erase("j-" + std::to_string(i));
    troupe::shrink_if_sparse(t);
  }
  CHECK(t.size() == 10);
  CHECK(t.bucket_count() <= 1024 * 2);
  // What is left is still there and found.
  for (int i = 99990; i < 100000; ++i) CHECK(t.at("j-" + std::to_string(i)) == i);
}

TEST_CASE("shrink_if_sparse: a table in use, or small, is not rehashed", "[actors][shrink]") {
  std::unordered_set<int> busy;
  for (int i = 0; i < 50000; ++i) busy.insert(i);
  const auto buckets = busy.bucket_count();
  // Half erased: still denser than an eighth of its buckets' room.
  for (int i = 0; i < 25000; ++i) {
    busy.erase(i);
    troupe::shrink_if_sparse(busy);
  }
  CHECK(busy.bucket_count() == buckets);

  std::unordered_set<int> small;
  for (int i = 0; i < 500; ++i) small.insert(i);
  const auto small_buckets = small.bucket_count();
  for (int i = 0; i < 499; ++i) {
    small.erase(i);
    troupe::shrink_if_sparse(small);
  }
  CHECK(small.bucket_count() == small_buckets);  // at most 1,024 buckets: left alone
}
