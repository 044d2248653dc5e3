// policy::Deadlines (actors/policy/deadlines.hpp): many deadlines, one check.
#include <catch2/catch.hpp>

#include "actors/policy/deadlines.hpp"

using troupe::policy::Deadlines;
using V = std::vector<std::string>;

TEST_CASE("deadlines come due earliest first, once each", "[policy][deadlines]") {
  Deadlines d;
  d.set("b", 200);
  d.set("a", 100);
  d.set("c", 300);
  CHECK(d.take_due(99).empty());
  CHECK(d.take_due(200) == V{"a", "b"});
  CHECK(d.size() == 1);
  CHECK(d.take_due(200).empty());
  CHECK(d.take_due(1000) == V{"c"});
  CHECK(d.empty());
}

TEST_CASE("a deadline set again replaces the earlier one, and a cleared one never comes",
          "[policy][deadlines]") {
  Deadlines d;
  d.set("a", 100);
  d.set("a", 500);  // restarted: its last deadline counts
  d.set("b", 100);
  d.clear("b");  // done in time
  d.clear("nobody");
  CHECK(d.take_due(400).empty());
  CHECK(d.take_due(500) == V{"a"});
  d.set("a", 50);  // set again after it came due: a new deadline
  CHECK(d.take_due(60) == V{"a"});
  CHECK(d.empty());
}
