// The HTTP API's pure rules (gateway/http_api.hpp), its tokens
// (gateway/auth/tokens.hpp), and docs/openapi.yaml against the routes served.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "gateway/auth/permissions.hpp"
#include "gateway/auth/tokens.hpp"
#include "gateway/http_api.hpp"
#include "gateway/streams.hpp"

using namespace troupe::gateway::http;
namespace ta = troupe::auth;
using Json = nlohmann::json;

TEST_CASE("http: docs/openapi.yaml has exactly the routes served, each with a problem reply",
          "[gateway][http]") {
  YAML::Node doc = YAML::LoadFile(std::string(TROUPE_SOURCE_DIR) + "/docs/openapi.yaml");
  REQUIRE(doc["openapi"].as<std::string>().rfind("3.0", 0) == 0);
  std::set<std::string> documented, served;
  for (const auto& path : doc["paths"]) {
    for (const auto& op : path.second) {
      std::string method = op.first.as<std::string>();
      if (method == "parameters") continue;
      std::transform(method.begin(), method.end(), method.begin(), ::toupper);
      documented.insert(method + " " + path.first.as<std::string>());
      INFO(method << " " << path.first.as<std::string>());
      CHECK(op.second["responses"]);
    }
  }
  for (const auto& r : routes()) served.insert(std::string(r.method) + " " + r.path);
  CHECK(documented == served);
  // The problem schema has the fields problem_json writes.
  Json p = Json::parse(problem_json(404, "not_found", "no job j-1"));
  for (const auto& f : doc["components"]["schemas"]["Problem"]["required"])
    CHECK(p.contains(f.as<std::string>()));
}

TEST_CASE("http: NATS API codes map to HTTP statuses, problems follow RFC 7807",
          "[gateway][http]") {
  CHECK(problem_status("not_found") == 404);
  CHECK(problem_status("bad_request") == 400);
  CHECK(problem_status("malformed") == 400);
  CHECK(problem_status("invalid_spec") == 422);
  CHECK(problem_status("unsatisfiable") == 422);
  CHECK(problem_status("wrong_team") == 403);
  CHECK(problem_status("too_large") == 413);
  CHECK(problem_status("rate_limited") == 429);
  CHECK(problem_status("too_many_queued") == 429);
  CHECK(problem_status("idempotency_conflict") == 409);
  CHECK(problem_status("unavailable") == 503);
  CHECK(problem_status("no_rank") == 404);
  CHECK(problem_status("something new") == 500);
  Json p = Json::parse(problem_json(429, "rate_limited", "slow down"));
  CHECK(p == Json{{"type", "urn:troupe:problem:rate_limited"},
                  {"title", "Too Many Requests"},
                  {"status", 429},
                  {"detail", "slow down"},
                  {"code", "rate_limited"}});
  // Invalid UTF-8 in a detail (an echoed id) still makes valid JSON.
  CHECK_FALSE(
      Json::parse(problem_json(400, "bad_request", "bad \xff id"), nullptr, false).is_discarded());
}

TEST_CASE("http: tokens come from the Authorization header or the session cookie",
          "[gateway][http]") {
  CHECK(bearer_token("Bearer abc") == "abc");
  CHECK(bearer_token("bearer  abc ") == "abc");
  CHECK(bearer_token("Basic abc").empty());
  CHECK(bearer_token("Bearer").empty());
  CHECK(bearer_token("").empty());
  CHECK(cookie_value("a=1; troupe_session=tok; b=2", kSessionCookie) == "tok");
  CHECK(cookie_value("troupe_session=tok", kSessionCookie) == "tok");
  CHECK(cookie_value("xtroupe_session=tok", kSessionCookie).empty());
  CHECK(cookie_value("a=1;b", kSessionCookie).empty());
}

TEST_CASE("http: a team's token acts for its team only, an admin's for any", "[gateway][http]") {
  Caller nlp{"nlp", false, "nlp"};
  Caller ops{"", true, "ops"};
  std::string why;
  CHECK(scope_team(nlp, "", &why) == std::optional<std::string>("nlp"));
  CHECK(scope_team(nlp, "nlp", &why) == std::optional<std::string>("nlp"));
  CHECK_FALSE(scope_team(nlp, "vision", &why));
  CHECK(why.find("nlp") != std::string::npos);
  CHECK(scope_team(ops, "", &why) == std::optional<std::string>(""));
  CHECK(scope_team(ops, "vision", &why) == std::optional<std::string>("vision"));
}

TEST_CASE("http: route paths match one segment per parameter", "[gateway][http]") {
  CHECK(path_matches("/v1/jobs/{id}", "/v1/jobs/j-1"));
  CHECK_FALSE(path_matches("/v1/jobs/{id}", "/v1/jobs/"));
  CHECK_FALSE(path_matches("/v1/jobs/{id}", "/v1/jobs/j-1/logs"));
  CHECK(path_matches("/v1/jobs/{id}/logs", "/v1/jobs/j-1/logs"));
  CHECK(path_matches("/v1/jobs", "/v1/jobs"));
  CHECK_FALSE(path_matches("/v1/jobs", "/v1/jobsx"));
}

TEST_CASE("http: queues get fair shares, a team's token sees its own rows and no hold",
          "[gateway][http]") {
  Json q = {{"pools", {{{"pool", "a100"}, {"gpus_total", 8}, {"hold", {{"job_id", "j-x"}}}}}},
            {"teams",
             {{{"team", "nlp"}, {"pool", "a100"}, {"weight", 1.0}},
              {{"team", "vision"}, {"pool", "a100"}, {"weight", 3.0}},
              {{"team", "nlp"}, {"pool", "h100"}, {"weight", 2.0}}}},
            {"grants", 5}};
  Json all = Json::parse(queues_view(q.dump(), ""));
  REQUIRE(all["teams"].size() == 3);
  CHECK(all["teams"][0]["fair_share"].get<double>() == Approx(0.25));
  CHECK(all["teams"][1]["fair_share"].get<double>() == Approx(0.75));
  CHECK(all["teams"][2]["fair_share"].get<double>() == Approx(1.0));
  CHECK(all["pools"][0].contains("hold"));
  Json mine = Json::parse(queues_view(q.dump(), "nlp"));
  REQUIRE(mine["teams"].size() == 2);
  for (const auto& t : mine["teams"]) CHECK(t["team"] == "nlp");
  CHECK(mine["teams"][0]["fair_share"].get<double>() == Approx(0.25));
  CHECK_FALSE(mine["pools"][0].contains("hold"));
  CHECK(mine["grants"] == 5);
  CHECK(queues_view("not json", "nlp") == "not json");
  // Through a front door each cluster's pools are its own: c1's default and
  // c2's default are shared by different teams.
  Json front = {{"teams",
                 {{{"team", "nlp"}, {"cluster", "c1"}, {"pool", "default"}, {"weight", 1.0}},
                  {{"team", "vision"}, {"cluster", "c2"}, {"pool", "default"}, {"weight", 3.0}},
                  {{"team", "nlp"}, {"cluster", "c2"}, {"pool", "default"}, {"weight", 1.0}}}}};
  Json shares = Json::parse(queues_view(front.dump(), ""));
  CHECK(shares["teams"][0]["fair_share"].get<double>() == Approx(1.0));
  CHECK(shares["teams"][1]["fair_share"].get<double>() == Approx(0.75));
  CHECK(shares["teams"][2]["fair_share"].get<double>() == Approx(0.25));
}

TEST_CASE("http: tokens are random, stored by their SHA-256, with a team or admin grant",
          "[gateway][http]") {
  std::string a = ta::new_token(), b = ta::new_token();
  CHECK(a != b);
  CHECK(ta::is_token(a));
  CHECK(a.rfind("trp_", 0) == 0);
  CHECK_FALSE(ta::is_token("trp_short"));
  CHECK_FALSE(ta::is_token(std::string("trp_") + std::string(42, 'a') + "!"));
  CHECK_FALSE(ta::is_token("xyz_" + a.substr(4)));
  std::string k = ta::token_key(a);
  CHECK(k.size() == 64);
  CHECK(k == ta::token_key(a));
  CHECK(k != ta::token_key(b));
  CHECK(ta::token_key("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");  // FIPS 180-2
  ta::TokenGrant g{"nlp", false, "nlp", 123};
  auto back = ta::parse_grant(ta::grant_json(g));
  REQUIRE(back);
  CHECK(back->team == "nlp");
  CHECK_FALSE(back->admin);
  CHECK(back->created_ms == 123);
  auto adm = ta::parse_grant(ta::grant_json(ta::TokenGrant{"", true, "ops", 0}));
  REQUIRE(adm);
  CHECK(adm->admin);
  CHECK(adm->name == "ops");
  CHECK_FALSE(ta::parse_grant("{}"));
  CHECK_FALSE(ta::parse_grant(R"({"team":"sys"})"));
  CHECK_FALSE(ta::parse_grant(R"({"team":"a.b"})"));
  CHECK_FALSE(ta::parse_grant("nope"));
}

TEST_CASE("http: the gateway identity may forward team verbs and read only the token bucket",
          "[gateway][http]") {
  auto p = ta::gateway_permissions();
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  CHECK(has(p.pub_allow, "troupe.*.status"));
  CHECK(has(p.pub_allow, "troupe.*.submit"));
  CHECK_FALSE(has(p.pub_allow, "troupe.*.enqueue"));
  CHECK(has(p.pub_allow, "troupe.sys.nodes"));
  CHECK(has(p.pub_allow, "troupe.sys.clusters"));  // GET /v1/clusters at a front door
  // Node operations, for admin tokens (the gateway checks the token).
  for (const char* s :
       {"troupe.sys.cordon", "troupe.sys.uncordon", "troupe.sys.drain", "troupe.sys.remove_node"})
    CHECK(has(p.pub_allow, s));
  CHECK_FALSE(has(p.pub_allow, "troupe.sys.debug.crash"));
  CHECK(has(p.pub_allow, "$JS.API.STREAM.INFO.KV_TROUPE_TOKENS"));
  for (const auto& s : p.pub_allow) {
    INFO(s);
    CHECK(s.find("$KV") == std::string::npos);
    CHECK(s.find("TROUPE_STATE") == std::string::npos);
    CHECK(s != "$JS.API.>");
  }
  CHECK(has(p.sub_allow, "_INBOX_gateway.>"));
}

TEST_CASE("http: long-lived responses are bounded per team and in all, and given back",
          "[gateway][http]") {
  StreamSlots slots(2, 3);
  std::string why;
  auto a1 = slots.take("nlp", &why);
  auto a2 = slots.take("nlp", &why);
  REQUIRE(a1);
  REQUIRE(a2);
  // The team's third: refused, saying the team's bound.
  CHECK_FALSE(slots.take("nlp", &why));
  CHECK_THAT(why, Catch::Contains("2 event streams") && Catch::Contains("one team"));
  CHECK(slots.open("nlp") == 2);
  // Another team gets the last place of the whole; then nobody does.
  auto b1 = slots.take("vision", &why);
  REQUIRE(b1);
  CHECK_FALSE(slots.take("vision", &why));
  CHECK_THAT(why, Catch::Contains("the gateway holds 3"));
  CHECK_FALSE(slots.take("audio", &why));
  CHECK(slots.open("audio") == 0);  // a refusal holds nothing
  CHECK(slots.open() == 3);
  // A place comes back when the last copy of its slot goes.
  auto copy = a1;
  a1.reset();
  CHECK(slots.open("nlp") == 2);
  copy.reset();
  CHECK(slots.open("nlp") == 1);
  CHECK(slots.open() == 2);
  auto a3 = slots.take("nlp", &why);
  CHECK(a3);
  // A slot outlives the object it came from.
  std::shared_ptr<const StreamSlots::Slot> kept;
  {
    StreamSlots other(1, 1);
    kept = other.take("x", &why);
    REQUIRE(kept);
  }
  kept.reset();
}
