// bus/subjects.hpp: token validation, builders, token().
#include <catch2/catch.hpp>
#include <string>

#include "bus/subjects.hpp"
#include "messages/names.hpp"

using namespace troupe;

TEST_CASE("subjects: check_token accepts letters, digits, '-' and '_'", "[messages][subjects]") {
  CHECK(subjects::check_token("a").empty());
  CHECK(subjects::check_token("team-1_B").empty());
  CHECK(subjects::check_token("j-0123abcdef").empty());
  CHECK(subjects::check_token(std::string(128, 'x')).empty());
}

TEST_CASE("subjects: check_token refuses what would break a subject", "[messages][subjects]") {
  CHECK_THAT(subjects::check_token(""), Catch::Contains("empty"));
  CHECK_THAT(subjects::check_token(std::string(129, 'x')), Catch::Contains("128"));
  for (const char* bad : {"a.b", "a*", ">", "a>", "a b", "a\tb", "a\nb", "é", "a/b", "a:b", "$x"}) {
    INFO("token: " << bad);
    CHECK_FALSE(subjects::check_token(bad).empty());
  }
  // The message names the token.
  CHECK_THAT(subjects::check_token("a.b"), Catch::Contains("'a.b'"));
}

TEST_CASE("subjects: valid_team refuses sys and invalid tokens", "[messages][subjects]") {
  CHECK(subjects::valid_team("nlp"));
  CHECK(subjects::valid_team("Sys"));  // only the exact reserved token
  CHECK_FALSE(subjects::valid_team("sys"));
  CHECK_FALSE(subjects::valid_team(names::kSysToken));
  CHECK_FALSE(subjects::valid_team(""));
  CHECK_FALSE(subjects::valid_team("a.b"));
  CHECK_FALSE(subjects::valid_team("*"));
}

TEST_CASE("subjects: builders", "[messages][subjects]") {
  CHECK(subjects::team_submit("t") == "troupe.t.submit");
  CHECK(subjects::team_submit_to("t", "a100") == "troupe.t.submit.a100");
  CHECK(subjects::team_submit_to("*", "a100") == "troupe.*.submit.a100");
  CHECK(subjects::team_status("t") == "troupe.t.status");
  CHECK(subjects::team_cancel("t") == "troupe.t.cancel");
  CHECK(subjects::team_logs("t") == "troupe.t.logs");
  CHECK(subjects::team_jobs("t") == "troupe.t.jobs");
  CHECK(subjects::team_verb("vision", "x") == "troupe.vision.x");
  CHECK(subjects::job_events("t", "j-1f") == "troupe.t.events.j-1f");
  CHECK(subjects::agent_to_scheduler("n1", subjects::kHeartbeat) ==
        "troupe.sys.agent.n1.heartbeat");
  CHECK(subjects::agent_to_scheduler("n1", subjects::kRegister) == "troupe.sys.agent.n1.register");
  CHECK(subjects::scheduler_to_agent("n2", subjects::kLaunch) == "troupe.sys.node.n2.launch");
  CHECK(subjects::scheduler_to_agent("n2", subjects::kLogs) == "troupe.sys.node.n2.logs");
  CHECK(subjects::intake("t") == "troupe.sys.intake.t");
  CHECK(std::string(subjects::kSysNodes) == "troupe.sys.nodes");
  CHECK(std::string(subjects::kAllEvents) == "troupe.*.events.>");
}

TEST_CASE("subjects: token() splits on dots", "[messages][subjects]") {
  const std::string s = "troupe.t1.submit";
  CHECK(subjects::token(s, 0) == "troupe");
  CHECK(subjects::token(s, subjects::kTeamToken) == "t1");
  CHECK(subjects::token(s, 2) == "submit");
  CHECK(subjects::token(s, 3).empty());
  CHECK(subjects::token(s, 10).empty());

  const auto hb = subjects::agent_to_scheduler("node-7", subjects::kHeartbeat);
  CHECK(subjects::token(hb, subjects::kAgentNodeToken) == "node-7");
  CHECK(subjects::token(hb, 4) == "heartbeat");

  CHECK(subjects::token("", 0).empty());
  CHECK(subjects::token("", 1).empty());
  CHECK(subjects::token("single", 0) == "single");
  CHECK(subjects::token("a..b", 1).empty());
  CHECK(subjects::token("a..b", 2) == "b");
  CHECK(subjects::token("a.", 1).empty());
}

TEST_CASE("names: states", "[messages][names]") {
  CHECK(names::is_terminal(names::kSucceeded));
  CHECK(names::is_terminal(names::kFailed));
  CHECK(names::is_terminal(names::kCanceled));
  for (auto s : {names::kQueued, names::kPlacing, names::kStarting, names::kRunning}) {
    INFO(std::string(s));
    CHECK_FALSE(names::is_terminal(s));
  }
  CHECK_FALSE(names::is_terminal("bogus"));
}

TEST_CASE("subjects: a submission handed between shards names its pool and team",
          "[messages][subjects]") {
  CHECK(subjects::shard_submit("h100", "ml") == "troupe.sys.shard.submit.h100.ml");
  CHECK(subjects::shard_submit_team(subjects::shard_submit("h100", "ml")) == "ml");
  CHECK(subjects::shard_read("h100", "ml") == "troupe.sys.shard.read.h100.ml");
  CHECK(subjects::shard_submit_team(subjects::shard_read("h100", "ml")) == "ml");
  CHECK(subjects::is_shard_read(subjects::shard_read("h100", "ml")));
  CHECK_FALSE(subjects::is_shard_read(subjects::shard_submit("h100", "ml")));
  CHECK_FALSE(subjects::is_shard_read("troupe.sys.shard.read.h100"));
  for (const char* other :
       {"troupe.ml.submit", "troupe.sys.shard.submit", "troupe.sys.shard.submit.",
        "troupe.sys.shard.submit.h100", "troupe.sys.shard.submit.h100.ml.x",
        "troupe.sys.shard.submitx.h100.ml", "troupe.sys.shard.part"}) {
    INFO(other);
    CHECK(subjects::shard_submit_team(other).empty());
  }
}

TEST_CASE(
    "subjects: a record made for a job's owner is a handoff record of its team, with or "
    "without its pool",
    "[messages][subjects]") {
  CHECK(subjects::handoff("ml", "h100") == "troupe.sys.intake.ml.handoff.h100");
  CHECK(subjects::is_handoff(subjects::handoff("ml"), "ml"));
  CHECK(subjects::is_handoff(subjects::handoff("ml", "h100"), "ml"));
  CHECK(subjects::pool_handoff_consumer("h100") == "troupe-handoff-h100");
  CHECK(subjects::pool_handoffs("h100") == "troupe.sys.intake.*.handoff.h100");
  for (const char* other :
       {"troupe.sys.intake.ml", "troupe.sys.intake.ml.handoff.", "troupe.sys.intake.ml.handoffx",
        "troupe.sys.intake.ml.handoff.h100.x", "troupe.sys.intake.mlx.handoff",
        "troupe.sys.intake.cv.handoff.h100", "troupe.sys.intake.ml.pipeline"}) {
    INFO(other);
    CHECK_FALSE(subjects::is_handoff(other, "ml"));
  }
}
