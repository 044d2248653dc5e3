// The HTTP API (troupe-gateway, docs/http.md) against a real gateway,
// scheduler, nats-server and agents: every route, bearer tokens per team and
// admin, refusals across teams, RFC 7807 problems, the console's session
// cookie, Server-Sent Events and a followed log that ends with its job.
#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "bus/subjects.hpp"
#include "harness.hpp"
#include "messages/names.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

struct Http {
  std::string base;
  std::string token;
  std::string cookie;
  std::string console_header;

  httplib::Client client() const {
    httplib::Client c(base);
    c.set_read_timeout(30, 0);
    c.set_connection_timeout(5, 0);
    return c;
  }
  httplib::Headers headers() const {
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    if (!cookie.empty()) h.emplace("Cookie", cookie);
    if (!console_header.empty()) h.emplace("X-Troupe-Console", console_header);
    return h;
  }
  httplib::Result get(const std::string& path) const { return client().Get(path, headers()); }
  httplib::Result del(const std::string& path) const { return client().Delete(path, headers()); }
  httplib::Result post(const std::string& path, const std::string& body) const {
    return client().Post(path, headers(), body, "application/json");
  }
};

std::string describe(const httplib::Result& r) {
  if (!r) return "no response: " + httplib::to_string(r.error());
  return std::to_string(r->status) + " " + r->get_header_value("Content-Type") + " " +
         r->body.substr(0, 800);
}

Json body_of(const httplib::Result& r) {
  REQUIRE(r);
  auto j = Json::parse(r->body, nullptr, false);
  INFO(describe(r));
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

// A problem+json reply with this status and code.
void check_problem(const httplib::Result& r, int status, const std::string& code) {
  INFO(describe(r));
  REQUIRE(r);
  CHECK(r->status == status);
  CHECK(r->get_header_value("Content-Type") == "application/problem+json");
  Json j = body_of(r);
  CHECK(j.value("status", 0) == status);
  CHECK(j.value("code", "") == code);
  CHECK(j.value("type", "") == "urn:troupe:problem:" + code);
  CHECK_FALSE(j.value("detail", "").empty());
}

std::string submit(const Http& h, const Json& spec) {
  auto r = h.post("/v1/jobs", spec.dump());
  INFO(describe(r));
  REQUIRE(r);
  REQUIRE(r->status == 201);
  std::string id = body_of(r).value("job_id", "");
  REQUIRE_FALSE(id.empty());
  CHECK(r->get_header_value("Location") == "/v1/jobs/" + id);
  return id;
}

// Runs `seq 1 150000` (1 MB of output: four pages of log) to its success and
// reads its log whole through GET /v1/jobs/{id}/logs; checks it byte for
// byte and returns the response (and the job's id in `id_out`).
httplib::Result read_long_log(Cluster& c, const Http& h, std::string* id_out = nullptr) {
  const std::string id =
      submit(h, Json{{"command", {"seq", "1", "150000"}}, {"resources", {{"gpus", 1}}}});
  auto ended = c.wait_terminal(id, 30s);
  REQUIRE(ended);
  REQUIRE(ended->state == names::kSucceeded);
  std::string expected;
  for (int i = 1; i <= 150000; ++i) expected += std::to_string(i) + "\n";
  auto whole = h.get("/v1/jobs/" + id + "/logs");
  REQUIRE(whole);
  CHECK(whole->status == 200);
  CHECK(whole->body.size() == expected.size());
  CHECK((whole->body == expected));
  if (id_out != nullptr) *id_out = id;
  return whole;
}

// A long-lived response (an SSE stream, a followed log) read on its own
// thread: its status, what came so far, and whether it ended. `stop`: let it
// go at its next bytes.
struct Stream {
  std::mutex m;
  std::condition_variable cv;
  std::string text;
  int status = 0;
  bool ended = false;
  std::atomic<bool> stop{false};
  bool wait_for(const std::string& needle, Clock::duration timeout) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, timeout, [&] { return text.find(needle) != std::string::npos; });
  }
  bool wait_end(Clock::duration timeout) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, timeout, [&] { return ended; });
  }
};

std::thread open_stream(const Http& h, const std::string& path, Stream& s) {
  return std::thread([&h, path, &s] {
    auto cl = h.client();
    cl.Get(
        path, h.headers(),
        [&](const httplib::Response& r) {
          std::lock_guard<std::mutex> lock(s.m);
          s.status = r.status;
          return true;
        },
        [&](const char* data, size_t n) {
          std::lock_guard<std::mutex> lock(s.m);
          s.text.append(data, n);
          s.cv.notify_all();
          return !s.stop.load();
        });
    std::lock_guard<std::mutex> lock(s.m);
    s.ended = true;
    s.cv.notify_all();
  });
}

}  // namespace

TEST_CASE(
    "http: every route with team and admin tokens, other teams' jobs are 404, errors are "
    "problem+json",
    "[integration][http]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string base = c.start_gateway({"--token-cache-ms", "0"});
  Http anon{base, "", "", ""};
  Http nlp{base, c.add_token("nlp"), "", ""};
  Http vision{base, c.add_token("vision"), "", ""};
  Http admin{base, c.add_token("ops", true), "", ""};

  // Health needs no token; readiness asks the scheduler.
  CHECK(anon.get("/healthz")->status == 200);
  CHECK(anon.get("/readyz")->status == 200);
  // No token, a malformed one, a well-formed unknown one: 401.
  auto none = anon.get("/v1/jobs");
  check_problem(none, 401, "unauthorized");
  CHECK(none->get_header_value("WWW-Authenticate").rfind("Bearer", 0) == 0);
  check_problem(Http{base, "nope", "", ""}.get("/v1/jobs"), 401, "unauthorized");
  check_problem(Http{base, "trp_" + std::string(43, 'A'), "", ""}.get("/v1/nodes"), 401,
                "unauthorized");
  CHECK(body_of(nlp.get("/v1/whoami")) == Json{{"team", "nlp"}, {"name", "nlp"}});
  CHECK(body_of(admin.get("/v1/whoami")).value("admin", false));
  // One cluster's own NATS has no front door: its clusters are not found.
  check_problem(nlp.get("/v1/clusters"), 404, "not_found");
  // Nor one cluster's queues to pick: its whole view is not shown as c1's.
  check_problem(nlp.get("/v1/queues?cluster=c1"), 400, "bad_request");

  // Submit (team from the token), status, list, logs, why, history.
  const std::string done =
      submit(nlp, Json{{"name", "hello"},
                       {"command", {"sh", "-c", "echo hello over http; echo line two"}},
                       {"resources", {{"gpus", 1}}}});
  auto ended = c.wait_terminal(done, 30s);
  REQUIRE(ended);
  CHECK(ended->state == names::kSucceeded);
  Json view = body_of(nlp.get("/v1/jobs/" + done));
  CHECK(view.value("job_id", "") == done);
  CHECK(view.value("team", "") == "nlp");
  CHECK(view.value("state", "") == names::kSucceeded);
  Json list = body_of(nlp.get("/v1/jobs?state=succeeded&limit=10"));
  REQUIRE(list.contains("jobs"));
  REQUIRE(list["jobs"].size() == 1);
  CHECK(list["jobs"][0].value("job_id", "") == done);
  auto log = nlp.get("/v1/jobs/" + done + "/logs?rank=0");
  INFO(describe(log));
  REQUIRE(log);
  CHECK(log->status == 200);
  CHECK(log->body == "hello over http\nline two\n");
  check_problem(nlp.get("/v1/jobs/" + done + "/logs?rank=x"), 400, "bad_request");
  {
    // A log of several pages (256 KiB each) reads whole, sent page by page
    // (chunked): the gateway holds a page, not the log.
    auto whole = read_long_log(c, nlp);
    CHECK(whole->get_header_value("Transfer-Encoding") == "chunked");
    CHECK(whole->get_header_value("Content-Type").rfind("text/plain", 0) == 0);
  }
  check_problem(nlp.get("/v1/jobs/" + done + "/logs?rank=3"), 404, "no_rank");
  Json why = body_of(nlp.get("/v1/jobs/" + done + "/why"));
  CHECK(why.value("pending", true) == false);
  CHECK(why.value("code", "") == "not_pending");
  Json hist;
  for (auto deadline = Clock::now() + 10s; Clock::now() < deadline;) {
    hist = body_of(nlp.get("/v1/jobs/" + done + "/history"));
    if (hist.contains("events") && hist["events"].size() >= 4) break;
    std::this_thread::sleep_for(50ms);  // the stream is written asynchronously; no event says so
  }
  REQUIRE(hist.contains("events"));
  CHECK(hist["events"].back().value("state", "") == names::kSucceeded);
  Json nodes = body_of(nlp.get("/v1/nodes"));
  REQUIRE(nodes.contains("nodes"));
  CHECK(nodes["nodes"].size() == 1);

  // Another team's job answers like no job at all, and nothing is changed.
  const std::string running = submit(nlp, Json{{"name", "long"},
                                               {"command", {"sh", "-c", "echo started; sleep 120"}},
                                               {"resources", {{"gpus", 1}}}});
  REQUIRE(c.events().wait_state(running, std::string(names::kRunning), 20s));
  for (const std::string& path :
       {"/v1/jobs/" + running, "/v1/jobs/" + running + "/logs", "/v1/jobs/" + running + "/why",
        "/v1/jobs/" + running + "/history", "/v1/jobs/" + running + "?team=nlp"})
    check_problem(vision.get(path), 404, "not_found");
  check_problem(vision.del("/v1/jobs/" + running), 404, "not_found");
  CHECK(c.status("nlp", running).value("state", "") == names::kRunning);
  Json vision_list = body_of(vision.get("/v1/jobs"));
  CHECK(vision_list.value("jobs", Json::array()).empty());
  check_problem(vision.get("/v1/jobs?team=nlp"), 403, "forbidden");
  check_problem(vision.post("/v1/jobs", Json{{"team", "nlp"}, {"command", {"true"}}}.dump()), 403,
                "wrong_team");
  Json vq = body_of(vision.get("/v1/queues"));
  for (const auto& t : vq.value("teams", Json::array())) CHECK(t.value("team", "") == "vision");
  Json aq = body_of(admin.get("/v1/queues"));
  bool nlp_row = false;
  for (const auto& t : aq.value("teams", Json::array())) {
    nlp_row = nlp_row || t.value("team", "") == "nlp";
    CHECK(t.contains("fair_share"));
  }
  CHECK(nlp_row);

  // The admin finds any team's job without naming the team, and lists all.
  CHECK(body_of(admin.get("/v1/jobs/" + running)).value("team", "") == "nlp");
  // nlp's three: hello, the long log, long.
  CHECK(body_of(admin.get("/v1/jobs")).value("jobs", Json::array()).size() == 3);
  check_problem(admin.post("/v1/jobs", Json{{"command", {"true"}}}.dump()), 400, "bad_request");

  // Node operations: an admin's only; the scheduler's answers and codes.
  check_problem(nlp.post("/v1/nodes/n1/cordon", ""), 403, "forbidden");
  check_problem(nlp.del("/v1/nodes/n1"), 403, "forbidden");
  auto node_n1 = [&] {
    for (const auto& n : body_of(admin.get("/v1/nodes")).value("nodes", Json::array()))
      if (n.value("node", "") == "n1") return n;
    return Json::object();
  };
  Json cordoned = body_of(admin.post("/v1/nodes/n1/cordon", R"({"reason":"disk swap"})"));
  CHECK(cordoned.value("state", "") == "cordoned");
  CHECK(node_n1().value("schedulable", true) == false);
  CHECK(node_n1().value("reason", "") == "disk swap");
  CHECK(body_of(admin.post("/v1/nodes/n1/uncordon", "")).value("state", "") == "schedulable");
  CHECK(node_n1().value("schedulable", false) == true);
  check_problem(admin.post("/v1/nodes/n1/drain", "{not json"), 400, "malformed");
  check_problem(admin.del("/v1/nodes/n1"), 409, "node_alive");  // its agent is heard
  check_problem(admin.del("/v1/nodes/n9"), 404, "unknown_node");

  // The scheduler's refusals keep their codes; bad requests are the gateway's.
  check_problem(nlp.post("/v1/jobs", "{not json"), 400, "malformed");
  // Nested 100,000 deep (200 KB): printing it on to the scheduler would end
  // the gateway on its stack, so it is malformed here (messages/json_text.hpp).
  check_problem(nlp.post("/v1/jobs", R"({"command":["true"],"x":)" + std::string(100000, '[') +
                                         std::string(100000, ']') + "}"),
                400, "malformed");
  check_problem(nlp.post("/v1/session", std::string(100000, '[') + std::string(100000, ']')), 401,
                "unauthorized");
  CHECK(body_of(nlp.get("/v1/whoami")).value("team", "") == "nlp");
  check_problem(
      nlp.post(
          "/v1/jobs",
          Json{{"command", {"true"}}, {"resources", {{"gpus", 1}}}, {"max_retries", 1000}}.dump()),
      422, "invalid_spec");
  // A schedule's runs: ?schedule=NAME, as ?label=troupe.schedule=NAME.
  {
    Json created = c.request(subjects::team_verb("nlp", subjects::kSchedule),
                             Json{{"op", "create"},
                                  {"name", "every-second"},
                                  {"cron", "@every 1s"},
                                  {"spec", {{"command", {"true"}}}}});
    INFO(created.dump());
    REQUIRE_FALSE(created.contains("error"));
    Json runs;
    for (auto until = Clock::now() + 20s; Clock::now() < until;) {
      runs = body_of(nlp.get("/v1/jobs?schedule=every-second"));
      if (runs.contains("jobs") && !runs["jobs"].empty()) break;
      std::this_thread::sleep_for(200ms);  // until its first tick has run
    }
    INFO(runs.dump());
    REQUIRE(runs.contains("jobs"));
    REQUIRE_FALSE(runs["jobs"].empty());
    for (const auto& j : runs["jobs"]) CHECK(j.value("job_id", "") != done);
    // label=key=value as curl sends it (the second '=' unencoded), and encoded.
    for (const char* q : {"/v1/jobs?label=troupe.schedule=every-second&limit=1",
                          "/v1/jobs?limit=1&label=troupe.schedule%3Devery-second"}) {
      auto by_label_res = nlp.get(q);
      INFO(q << ": " << describe(by_label_res));
      Json by_label = body_of(by_label_res);
      REQUIRE(by_label.contains("jobs"));
      REQUIRE(by_label["jobs"].size() == 1);
      CHECK(by_label["jobs"][0].value("job_id", "") == runs["jobs"][0].value("job_id", "x"));
    }
    CHECK(body_of(nlp.get("/v1/jobs?schedule=no-such"))["jobs"].empty());
    check_problem(nlp.get("/v1/jobs?schedule=every-second&label=a=b"), 400, "bad_request");
    check_problem(nlp.get("/v1/jobs?schedule=" + std::string(400, 'x')), 400, "bad_request");
    check_problem(nlp.get("/v1/jobs?schedule=a.b"), 400, "bad_request");
    c.request(subjects::team_verb("nlp", subjects::kSchedule),
              Json{{"op", "delete"}, {"name", "every-second"}});
  }
  check_problem(nlp.get("/v1/jobs?limit=0"), 400, "bad_request");
  check_problem(nlp.get("/v1/jobs?state=bogus"), 400, "bad_request");
  check_problem(nlp.get("/v1/jobs/j-0000000000a-ffffff"), 404, "not_found");
  check_problem(nlp.get("/v1/nothing"), 404, "not_found");
  {
    auto put = nlp.client().Put("/v1/jobs", nlp.headers(), "{}", "application/json");
    check_problem(put, 405, "method_not_allowed");
  }
  {
    std::string huge(2 << 20, 'x');
    auto big = nlp.post("/v1/jobs", huge);
    INFO(describe(big));
    REQUIRE(big);
    CHECK(big->status == 413);
  }

  // Cancel.
  Json canceled = body_of(nlp.del("/v1/jobs/" + running));
  CHECK(canceled.value("job_id", "") == running);
  auto cend = c.wait_terminal(running, 30s);
  REQUIRE(cend);
  CHECK(cend->state == names::kCanceled);

  // The console's session: the token becomes an HttpOnly cookie; a change
  // made with the cookie needs the console's header (CSRF).
  auto login = anon.post("/v1/session", Json{{"token", nlp.token}}.dump());
  INFO(describe(login));
  REQUIRE(login);
  CHECK(login->status == 204);
  const std::string set_cookie = login->get_header_value("Set-Cookie");
  CHECK(set_cookie.find("HttpOnly") != std::string::npos);
  CHECK(set_cookie.find("SameSite=Strict") != std::string::npos);
  const std::string cookie = set_cookie.substr(0, set_cookie.find(';'));
  check_problem(anon.post("/v1/session", Json{{"token", "trp_wrong"}}.dump()), 401, "unauthorized");
  Http session{base, "", cookie, ""};
  CHECK(body_of(session.get("/v1/whoami")).value("team", "") == "nlp");
  check_problem(session.del("/v1/jobs/" + done), 403, "forbidden");
  check_problem(session.post("/v1/jobs", Json{{"command", {"true"}}}.dump()), 403, "forbidden");
  Http console{base, "", cookie, "1"};
  CHECK(body_of(console.del("/v1/jobs/" + done)).value("state", "") == names::kSucceeded);

  // A revoked token stops working (the gateway caches for 0 ms here).
  RunResult revoked = c.run_cli({"auth", "revoke-token", vision.token, "--home", c.dir()});
  INFO(it::describe(revoked));
  REQUIRE(revoked.exit_code == 0);
  check_problem(vision.get("/v1/jobs"), 401, "unauthorized");

  // The gateway counted what it refused.
  auto metrics = anon.get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("troupe_gateway_refused_total{reason=\"unauthorized\"}") !=
        std::string::npos);
  CHECK(metrics->body.find("troupe_gateway_requests_total") != std::string::npos);
}

TEST_CASE("http: Server-Sent Events carry a job's events, a followed log ends when its job ends",
          "[integration][http]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string base = c.start_gateway();
  Http nlp{base, c.add_token("nlp"), "", ""};
  Http vision{base, c.add_token("vision"), "", ""};

  // Two SSE clients: nlp's sees its job's events, vision's sees none of them.
  Stream mine, theirs;
  std::thread t1 = open_stream(nlp, "/v1/events", mine);
  std::thread t2 = open_stream(vision, "/v1/events", theirs);
  // Both streams are open (their first bytes came) before the job exists.
  REQUIRE(mine.wait_for(": troupe events", 10s));
  REQUIRE(theirs.wait_for(": troupe events", 10s));

  const std::string id =
      submit(nlp, Json{{"name", "follow-me"},
                       {"command", {"sh", "-c", "for i in 1 2 3; do echo tick $i; sleep 1; done"}},
                       {"resources", {{"gpus", 1}}}});
  // A followed log: chunked, each line as it comes (also to a client that
  // accepts compression, as browsers do), and the response ends when the job
  // has ended (the client's read timeout, 30 s, is not what ends it).
  std::string followed, state_at_first;
  auto headers = nlp.headers();
  headers.emplace("Accept-Encoding", "gzip, deflate, br");
  auto follow = nlp.client().Get(
      "/v1/jobs/" + id + "/logs?follow=1", headers,
      [&](const httplib::Response& r) { return r.status == 200; },
      [&](const char* data, size_t n) {
        if (followed.empty()) state_at_first = c.status("nlp", id).value("state", "");
        followed.append(data, n);
        return true;
      });
  INFO(describe(follow));
  REQUIRE(follow);
  CHECK(follow->status == 200);
  CHECK(follow->get_header_value("Transfer-Encoding") == "chunked");
  CHECK(follow->get_header_value("Content-Encoding").empty());
  CHECK(followed == "tick 1\ntick 2\ntick 3\n");
  // The first line came while the job ran, not after it ended. (The job may
  // still read "starting": its first line can reach the gateway before the
  // agent's report that the process started reaches the job.)
  INFO("state at the first line: " << state_at_first);
  CHECK((state_at_first == names::kStarting || state_at_first == names::kRunning));
  Json st = c.status("nlp", id);
  CHECK(names::is_terminal(st.value("state", "")));

  const std::string terminal = "\"job_id\":\"" + id + "\",\"team\":\"nlp\",\"state\":\"succeeded\"";
  INFO("nlp's stream:\n" << mine.text);
  CHECK(mine.wait_for(terminal, 20s));
  {
    std::lock_guard<std::mutex> lock(mine.m);
    CHECK(mine.text.find("event: job\ndata: {") != std::string::npos);
    CHECK(mine.text.find("\"state\":\"running\"") != std::string::npos);
  }
  // vision's stream had the same time and carried none of nlp's events; an
  // event of its own shows it was live all along.
  const std::string own = submit(vision, Json{{"command", {"true"}}, {"resources", {{"gpus", 1}}}});
  CHECK(theirs.wait_for("\"job_id\":\"" + own + "\"", 20s));
  {
    std::lock_guard<std::mutex> lock(theirs.m);
    CHECK(theirs.text.find(id) == std::string::npos);
  }
  // vision may not ask for nlp's stream.
  check_problem(vision.get("/v1/events?team=nlp"), 403, "forbidden");
  mine.stop = true;
  theirs.stop = true;
  // Each stream ends at its next write (a keepalive or an event): one more
  // job of each team wakes both.
  submit(nlp, Json{{"command", {"true"}}, {"resources", {{"gpus", 1}}}});
  submit(vision, Json{{"command", {"true"}}, {"resources", {{"gpus", 1}}}});
  t1.join();
  t2.join();
}

TEST_CASE(
    "http: event streams and followed logs are bounded per team and in all (429), and a "
    "place comes back when its stream ends",
    "[integration][http]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string base = c.start_gateway({"--max-streams-per-team", "2", "--max-streams", "3"});
  Http nlp{base, c.add_token("nlp"), "", ""};
  Http vision{base, c.add_token("vision"), "", ""};

  // The status a new stream would get (200: it opened, then is let go).
  auto probe = [](const Http& h, const std::string& path) {
    int status = 0;
    auto r = h.client().Get(
        path, h.headers(),
        [&](const httplib::Response& resp) {
          status = resp.status;
          return resp.status != 200;  // a stream: let it go; a problem: read it
        },
        [&](const char*, size_t) { return true; });
    return std::make_pair(status, r ? r->body : std::string());
  };

  // nlp holds its two: an event stream, and a followed log of a job that
  // prints, then runs 4 s more.
  Stream events, log, theirs;
  std::thread t1 = open_stream(nlp, "/v1/events", events);
  REQUIRE(events.wait_for(": troupe events", 10s));
  const std::string id = submit(
      nlp, Json{{"command", {"sh", "-c", "echo up; sleep 4"}}, {"resources", {{"gpus", 1}}}});
  std::thread t2 = open_stream(nlp, "/v1/jobs/" + id + "/logs?follow=1", log);
  REQUIRE(log.wait_for("up\n", 20s));

  // A third of nlp's: refused, 429 with Retry-After, saying the team's bound.
  auto third = nlp.get("/v1/events");
  check_problem(third, 429, "too_many_streams");
  REQUIRE(third);
  CHECK(third->get_header_value("Retry-After") == "5");
  CHECK_THAT(third->body, Catch::Contains("team nlp"));
  // vision takes the gateway's last place; its second is refused for the whole.
  std::thread t3 = open_stream(vision, "/v1/events", theirs);
  REQUIRE(theirs.wait_for(": troupe events", 10s));
  auto full = vision.get("/v1/events");
  check_problem(full, 429, "too_many_streams");
  REQUIRE(full);
  CHECK_THAT(full->body, Catch::Contains("the gateway holds 3"));
  // Every other request is still served, for both teams.
  CHECK(body_of(nlp.get("/v1/whoami")).value("team", "") == "nlp");
  CHECK(body_of(vision.get("/v1/whoami")).value("team", "") == "vision");
  CHECK(body_of(nlp.get("/v1/jobs/" + id)).value("job_id", "") == id);
  auto metrics = httplib::Client(base).Get("/metrics");
  REQUIRE(metrics);
  CHECK_THAT(metrics->body,
             Catch::Contains("troupe_gateway_refused_total{reason=\"too_many_streams\"} 2"));

  // The followed log ends with its job, and gives its place back: nlp opens
  // a stream again.
  REQUIRE(log.wait_end(30s));
  {
    std::lock_guard<std::mutex> lock(log.m);
    CHECK(log.status == 200);
  }
  auto deadline = Clock::now() + 20s;
  std::pair<int, std::string> again{0, ""};
  while (Clock::now() < deadline) {
    again = probe(nlp, "/v1/events");
    if (again.first == 200) break;
    std::this_thread::sleep_for(200ms);
  }
  INFO("nlp's stream after its log ended: " << again.first << " " << again.second);
  CHECK(again.first == 200);

  // Let the streams go: each ends at its next write (an event of its team).
  events.stop = true;
  theirs.stop = true;
  submit(nlp, Json{{"command", {"true"}}, {"resources", {{"gpus", 1}}}});
  submit(vision, Json{{"command", {"true"}}, {"resources", {{"gpus", 1}}}});
  t1.join();
  t2.join();
  t3.join();
}

TEST_CASE(
    "http: a plain read of a long log goes on at the team's request_rate, and a request past "
    "it is 429",
    "[integration][http]") {
  ClusterOptions o = ClusterOptions{}.with_config(R"(
pools: [{name: default, gpu_type: a100}]
teams:
  - {name: nlp, limits: {request_rate: 2, request_burst: 2}}
)");
  o.node("n1", 2);
  Cluster c(o);
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string base = c.start_gateway({"--token-cache-ms", "0"});
  Http nlp{base, c.add_token("nlp"), "", ""};
  // Submissions have their own rate; five pages of log at two a second do not.
  std::string id;
  read_long_log(c, nlp, &id);
  // Five requests at once, with at most two tokens in the bucket: refused,
  // 429 rate_limited.
  std::optional<httplib::Result> refused;
  for (int i = 0; i < 5 && !refused; ++i) {
    auto r = nlp.get("/v1/jobs/" + id);
    REQUIRE(r);
    if (r->status != 200) refused = std::move(r);
  }
  REQUIRE(refused);
  check_problem(*refused, 429, "rate_limited");
  CHECK_THAT((*refused)->body, Catch::Contains("request_rate 2/s"));
}
