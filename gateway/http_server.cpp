// troupe-gateway's HTTP server (see http_server.hpp). Owns: the NATS
// connection of identity `gateway`, the token cache, the HTTP metrics.
// Handles: the routes of http_api.hpp (each a request on the subject of
// bus/subjects.hpp that the NATS API documents, docs/api.md), the console's
// files (console_assets.hpp), /metrics.
#include "gateway/http_server.hpp"

#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "bus/subjects.hpp"
#include "gateway/auth/tokens.hpp"
#include "gateway/client.hpp"
#include "gateway/console_assets.hpp"
#include "gateway/http_api.hpp"
#include "gateway/pipeline_view.hpp"
#include "gateway/policy_view.hpp"
#include "gateway/replies.hpp"
#include "gateway/streams.hpp"
#include "messages/json_text.hpp"
#include "messages/names.hpp"

namespace troupe::gateway::http {

namespace {

// A query parameter's whole value: cpp-httplib keeps only what follows the
// last '=' of "label=key=value", so it is read from the raw target (URL-
// decoded). "" when absent.
std::string whole_param(const httplib::Request& req, std::string_view name) {
  const auto q = req.target.find('?');
  if (q == std::string::npos) return {};
  std::string_view rest(req.target);
  rest.remove_prefix(q + 1);
  for (;;) {
    const auto amp = rest.find('&');
    const std::string_view part = rest.substr(0, amp);
    const auto eq = part.find('=');
    if (part.substr(0, eq) == name)
      return httplib::detail::decode_url(
          std::string(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1)),
          true);
    if (amp == std::string_view::npos) return {};
    rest.remove_prefix(amp + 1);
  }
}

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

constexpr const char* kJsonType = "application/json";
constexpr int kLogPageBytes = 256 * 1024;
// The whole log of a plain (not followed) read is capped: a bigger one is
// read with follow or in pages through the NATS API. A plain read holds one
// page at a time (kLogPageBytes), not the log: it is sent page by page.
constexpr std::size_t kMaxLogBytes = 64u << 20;
constexpr auto kFollowPoll = std::chrono::milliseconds(300);
constexpr auto kKeepalive = std::chrono::seconds(15);
constexpr std::size_t kMaxQueuedEvents = 4096;
// A thread per connection being served: SSE clients and followed logs each
// hold one while open (ServerOptions::max_streams of them at most).
constexpr std::size_t kHttpThreads = 128;

void send_problem(httplib::Response& res, int status, const std::string& code,
                  const std::string& detail) {
  res.status = status;
  res.set_content(problem_json(status, code, detail), kProblemType);
}

// One SSE client's events, filled by its NATS subscription.
struct EventQueue {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::string> items;
  int64_t dropped = 0;
};

}  // namespace

struct Server::Impl {
  ServerOptions opts;
  ClientPtr client;
  httplib::Server http;
  int port = 0;
  std::atomic<bool> stopping{false};

  // Tokens: key (sha256) -> grant or none, until `until`.
  struct Cached {
    std::optional<auth::TokenGrant> grant;
    Clock::time_point until;
  };
  std::mutex token_mu;
  std::map<std::string, Cached> tokens;
  bus::JetStreamPtr js;
  bus::KeyValuePtr kv;

  prometheus::Registry registry;
  prometheus::Family<prometheus::Counter>* requests = nullptr;
  prometheus::Counter* auth_failed = nullptr;
  prometheus::Counter* forbidden = nullptr;
  prometheus::Counter* bad_requests = nullptr;
  prometheus::Counter* nats_errors = nullptr;
  prometheus::Counter* events_dropped = nullptr;
  prometheus::Counter* streams_refused = nullptr;
  std::optional<StreamSlots> streams;  // from opts, in install()

  void install();
  // A place for one more long-lived response of the caller (an event stream,
  // a followed log), or nullptr with its 429 problem sent.
  std::shared_ptr<const StreamSlots::Slot> take_stream(const Caller& c, httplib::Response& res);

  // The grant of `token`, nullopt when it is none (or the bucket cannot be
  // read: `*unavailable` then).
  std::optional<auth::TokenGrant> lookup(const std::string& token, bool* unavailable);
  // The caller of a /v1 request, or the problem sent (false).
  bool authenticate(const httplib::Request& req, httplib::Response& res, Caller* out);
  // Sends `body` to `subject` and answers with its reply: the reply as it is,
  // or its {"error","code"} as a problem. `ok_status` for a success.
  // `fallback`: the subject asked instead when nobody answers on `subject`.
  bool forward(const std::string& subject, const std::string& body, httplib::Response& res,
               std::string* reply = nullptr, int ok_status = 200, const std::string& fallback = {});
  // The team a job-scoped request acts for: the token's team, or for an admin
  // ?team= or the job's team (troupe.sys.find). False: the problem is sent.
  bool job_team(const Caller& c, const httplib::Request& req, const std::string& id,
                httplib::Response& res, std::string* team);

  // The team a listing (jobs, events) is for: ?team= as the token allows
  // ("" for an admin's every team). False: the problem is sent.
  bool list_team(const Caller& c, const httplib::Request& req, httplib::Response& res,
                 std::string* team);

  void logs(const Caller& c, const httplib::Request& req, httplib::Response& res);
  // One page of a worker's log from `offset`; false when it cannot be read,
  // with the problem's code ("unavailable": NATS) and text where asked.
  bool log_page(const std::string& team, const std::string& id, int rank, int64_t offset,
                LogChunk* out, std::string* code, std::string* text);
  void events(const Caller& c, const httplib::Request& req, httplib::Response& res);
};

std::optional<auth::TokenGrant> Server::Impl::lookup(const std::string& token, bool* unavailable) {
  *unavailable = false;
  if (!auth::is_token(token)) return std::nullopt;
  const std::string key = auth::token_key(token);
  std::lock_guard<std::mutex> lock(token_mu);
  auto now = Clock::now();
  if (auto it = tokens.find(key); it != tokens.end() && it->second.until > now)
    return it->second.grant;
  if (!kv) {
    std::string err;
    if (!js) js = bus::JetStream::open(client->connection(), &err);
    if (js) kv = bus::KeyValue::open(*js, subjects::kTokenBucket, &err);
  }
  if (!kv) {  // no bucket yet: no token was ever made
    tokens[key] = Cached{std::nullopt, now + std::chrono::milliseconds(1000)};
    return std::nullopt;
  }
  bool failed = false;
  auto entry = kv->get(key, &failed);
  if (failed) {
    *unavailable = true;
    return std::nullopt;
  }
  std::optional<auth::TokenGrant> grant;
  if (entry && !entry->value.empty()) grant = auth::parse_grant(entry->value);
  if (tokens.size() > 100000) tokens.clear();  // bounded: a flood of wrong tokens
  tokens[key] = Cached{grant, now + std::chrono::milliseconds(opts.token_cache_ms)};
  return grant;
}

bool Server::Impl::authenticate(const httplib::Request& req, httplib::Response& res, Caller* out) {
  std::string token = bearer_token(req.get_header_value("Authorization"));
  bool from_cookie = false;
  if (token.empty()) {
    token = cookie_value(req.get_header_value("Cookie"), kSessionCookie);
    from_cookie = !token.empty();
  }
  if (token.empty()) {
    auth_failed->Increment();
    res.set_header("WWW-Authenticate", "Bearer realm=\"troupe\"");
    send_problem(res, 401, "unauthorized",
                 "a bearer token is required (troupe auth add-token --team TEAM)");
    return false;
  }
  bool unavailable = false;
  auto grant = lookup(token, &unavailable);
  if (unavailable) {
    nats_errors->Increment();
    send_problem(res, 503, "unavailable", "the token store did not answer; retry");
    return false;
  }
  if (!grant) {
    auth_failed->Increment();
    res.set_header("WWW-Authenticate", "Bearer realm=\"troupe\", error=\"invalid_token\"");
    send_problem(res, 401, "unauthorized", "the token is not valid");
    return false;
  }
  if (from_cookie && req.method != "GET" && req.method != "HEAD" &&
      req.get_header_value(kConsoleHeader) != "1") {
    forbidden->Increment();
    send_problem(res, 403, "forbidden",
                 std::string("a request authenticated by the session cookie must carry ") +
                     kConsoleHeader + ": 1");
    return false;
  }
  out->team = grant->team;
  out->admin = grant->admin;
  out->name = grant->name;
  return true;
}

bool Server::Impl::forward(const std::string& subject, const std::string& body,
                           httplib::Response& res, std::string* reply_out, int ok_status,
                           const std::string& fallback) {
  std::string reply;
  if (auto err = client->forward_or(subject, fallback, body, &reply); !err.empty()) {
    nats_errors->Increment();
    send_problem(res, 503, "unavailable", err);
    return false;
  }
  if (auto e = reply_error_of(reply)) {
    std::string code = e->code.empty() ? "error" : e->code;
    send_problem(res, problem_status(code), code, e->text);
    return false;
  }
  res.status = ok_status;
  res.set_content(reply, kJsonType);
  if (reply_out != nullptr) *reply_out = std::move(reply);
  return true;
}

bool Server::Impl::job_team(const Caller& c, const httplib::Request& req, const std::string& id,
                            httplib::Response& res, std::string* team) {
  if (auto err = names::check_token(id); !err.empty()) {
    bad_requests->Increment();
    send_problem(res, 400, "bad_request", "job id: " + err);
    return false;
  }
  std::string why;
  auto t = scope_team(c, req.get_param_value("team"), &why);
  if (!t) {  // another team's job is answered like no job at all
    send_problem(res, 404, "not_found", "no job " + id);
    return false;
  }
  if (!t->empty()) {
    *team = *t;
    return true;
  }
  std::string reply;  // (the caller's own request replaces this reply's content)
  if (!forward(subjects::kSysFind, job_request(id), res, &reply)) return false;
  auto j = json_text::parse<Json>(reply);
  if (j.is_discarded() || !j.is_object() || !j.contains("team") || !j["team"].is_string()) {
    send_problem(res, 503, "unavailable", "unreadable reply from troupe.sys.find");
    return false;
  }
  *team = j["team"].get<std::string>();
  return true;
}

bool Server::Impl::list_team(const Caller& c, const httplib::Request& req, httplib::Response& res,
                             std::string* team) {
  std::string why;
  auto t = scope_team(c, req.get_param_value("team"), &why);
  if (!t) {
    forbidden->Increment();
    send_problem(res, 403, "forbidden", why);
    return false;
  }
  if (!t->empty() && (!names::check_token(*t).empty() || !names::valid_team(*t))) {
    bad_requests->Increment();
    send_problem(res, 400, "bad_request", "team: not a team name");
    return false;
  }
  *team = *t;
  return true;
}

bool Server::Impl::log_page(const std::string& team, const std::string& id, int rank,
                            int64_t offset, LogChunk* out, std::string* code, std::string* text) {
  std::string reply;
  if (auto err = client->forward(subjects::team_logs(team),
                                 logs_request(id, rank, offset, kLogPageBytes), &reply);
      !err.empty()) {
    if (code) *code = "unavailable";
    if (text) *text = err;
    return false;
  }
  if (auto e = reply_error_of(reply)) {
    if (code) *code = e->code.empty() ? "error" : e->code;
    if (text) *text = e->text;
    return false;
  }
  *out = parse_log_reply(reply, offset);
  return true;
}

void Server::Impl::logs(const Caller& c, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  std::string team;
  if (!job_team(c, req, id, res, &team)) return;
  int rank = 0;
  if (req.has_param("rank")) {
    const std::string r = req.get_param_value("rank");
    char* end = nullptr;
    long v = std::strtol(r.c_str(), &end, 10);
    if (r.empty() || *end != '\0' || v < 0 || v > 1 << 20) {
      bad_requests->Increment();
      send_problem(res, 400, "bad_request", "rank must be a non-negative integer");
      return;
    }
    rank = static_cast<int>(v);
  }
  const std::string follow = req.get_param_value("follow");
  if (!follow.empty() && follow != "1" && follow != "true" && follow != "0" && follow != "false") {
    bad_requests->Increment();
    send_problem(res, 400, "bad_request", "follow must be 1, true, 0 or false");
    return;
  }
  const bool follow_on = follow == "1" || follow == "true";
  // The job must be the team's (a 404 otherwise), whatever follows.
  std::string view;
  if (!forward(subjects::team_status(team), job_request(id), res, &view)) return;
  res.body.clear();
  res.headers.erase("Content-Type");
  if (!follow_on) {
    // The first page is read here, so that an error is still the status.
    LogChunk first;
    std::string problem_code, problem_text;
    if (!log_page(team, id, rank, 0, &first, &problem_code, &problem_text)) {
      if (problem_code == "unavailable") nats_errors->Increment();
      send_problem(res,
                   problem_code == "unavailable" || problem_code == "error"
                       ? 503
                       : problem_status(problem_code),
                   problem_code, problem_text);
      return;
    }
    if (first.eof || first.next_offset <= 0) {
      res.status = 200;
      res.set_content(std::move(first.data), "text/plain; charset=utf-8");
      return;
    }
    // A longer log goes out page by page: one page in memory, not the log.
    // A page that cannot be read then cuts the response off (the client
    // sees a transfer that did not end), rather than end it as if whole.
    struct Plain {
      std::string pending;
      int64_t offset = 0;
      std::size_t sent = 0;
      bool last = false;
    };
    auto st = std::make_shared<Plain>();
    st->pending = std::move(first.data);
    st->offset = first.next_offset;
    res.status = 200;
    res.set_chunked_content_provider(
        "text/plain; charset=utf-8", [this, team, id, rank, st](size_t, httplib::DataSink& sink) {
          while (st->pending.empty() && !st->last && st->sent < kMaxLogBytes) {
            LogChunk page;
            std::string code;
            // Past the team's request_rate (a long log is many pages):
            // the next page a little later, as the CLI does.
            bool read = false;
            while_rate_limited(
                [&] {
                  read = log_page(team, id, rank, st->offset, &page, &code, nullptr);
                  return !read && code == "rate_limited";
                },
                &stopping);
            if (!read) return false;
            st->last = page.eof || page.next_offset <= st->offset;
            st->offset = page.next_offset;
            st->pending = std::move(page.data);
          }
          if (st->pending.empty()) {
            sink.done();
            return true;
          }
          if (!sink.write(st->pending.data(), st->pending.size())) return false;
          st->sent += st->pending.size();
          st->pending.clear();
          if (st->sent >= kMaxLogBytes) st->last = true;
          return true;
        });
    return;
  }
  // Follow: chunked, until the job is terminal and its log read to the end.
  auto slot = take_stream(c, res);
  if (!slot) return;
  auto offset = std::make_shared<int64_t>(0);
  res.status = 200;
  // Not text/plain: httplib compresses text for a client that accepts it,
  // and its compressor holds a chunked stream back until the end.
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_chunked_content_provider(
      "application/octet-stream",
      [this, team, id, rank, offset, slot](size_t, httplib::DataSink& sink) {
        while (!stopping.load()) {
          if (!sink.is_writable()) return false;
          bool eof = false;
          if (LogChunk chunk; log_page(team, id, rank, *offset, &chunk, nullptr, nullptr)) {
            if (!chunk.data.empty()) {
              if (!sink.write(chunk.data.data(), chunk.data.size())) return false;
              *offset = chunk.next_offset;
              return true;  // called again at once
            }
            eof = chunk.eof;
          }
          // Nothing new (or no rank yet, or a failover): done once the job is.
          std::string status;
          if (client->forward(subjects::team_status(team), job_request(id), &status).empty()) {
            auto j = json_text::parse<Json>(status);
            if (j.is_object() && names::is_terminal(j.value("state", std::string())) &&
                (eof || !j.contains("placement"))) {
              sink.done();
              return true;
            }
          }
          std::this_thread::sleep_for(kFollowPoll);
        }
        sink.done();
        return true;
      });
}

std::shared_ptr<const StreamSlots::Slot> Server::Impl::take_stream(const Caller& c,
                                                                   httplib::Response& res) {
  const std::string key = c.admin ? "admin " + c.name : c.team;
  std::string why;
  auto slot = streams->take(key, &why);
  if (!slot) {
    streams_refused->Increment();
    res.set_header("Retry-After", "5");
    send_problem(res, 429, "too_many_streams", (c.admin ? key : "team " + key) + ": " + why);
  }
  return slot;
}

void Server::Impl::events(const Caller& c, const httplib::Request& req, httplib::Response& res) {
  std::string team;
  if (!list_team(c, req, res, &team)) return;
  auto slot = take_stream(c, res);
  if (!slot) return;
  const std::string subject =
      team.empty() ? subjects::kAllEvents : subjects::team_verb(team, subjects::kEvents) + ".>";
  auto q = std::make_shared<EventQueue>();
  std::shared_ptr<bus::Subscription> sub =
      client->connection().subscribe(subject, [q](Inbound&& in) {
        std::lock_guard<std::mutex> lock(q->m);
        if (q->items.size() >= kMaxQueuedEvents) {
          ++q->dropped;
          return;
        }
        q->items.emplace_back(in.data.begin(), in.data.end());
        q->cv.notify_one();
      });
  client->connection().flush(1000);  // subscribed before the stream starts
  res.status = 200;
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  auto dropped_counter = events_dropped;
  res.set_chunked_content_provider("text/event-stream", [this, q, sub, dropped_counter, slot,
                                                         first = std::make_shared<bool>(true)](
                                                            size_t, httplib::DataSink& sink) {
    if (*first) {
      *first = false;
      const std::string hello = "retry: 2000\n: troupe events\n\n";
      return sink.write(hello.data(), hello.size());
    }
    std::deque<std::string> batch;
    int64_t dropped = 0;
    {
      std::unique_lock<std::mutex> lock(q->m);
      auto deadline = Clock::now() + kKeepalive;
      while (q->items.empty() && q->dropped == 0 && !stopping.load())
        if (q->cv.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::seconds(1))) ==
                std::cv_status::timeout &&
            Clock::now() >= deadline)
          break;
      batch.swap(q->items);
      std::swap(dropped, q->dropped);
    }
    if (stopping.load()) {
      sink.done();
      return true;
    }
    std::string out;
    if (dropped > 0) {
      dropped_counter->Increment(static_cast<double>(dropped));
      out += "event: dropped\ndata: {\"dropped\":" + std::to_string(dropped) + "}\n\n";
    }
    for (const auto& e : batch) {
      out += "event: job\ndata: ";
      for (char ch : e) out += ch == '\n' ? ' ' : ch;  // one data line per event
      out += "\n\n";
    }
    if (out.empty()) out = ": keepalive\n\n";
    return sink.write(out.data(), out.size());
  });
}

void Server::Impl::install() {
  auto& fam = prometheus::BuildCounter()
                  .Name("troupe_gateway_requests_total")
                  .Help("HTTP API requests answered, by route and status")
                  .Register(registry);
  requests = &fam;
  auto& other = prometheus::BuildCounter()
                    .Name("troupe_gateway_refused_total")
                    .Help("HTTP API requests refused by the gateway itself, by reason")
                    .Register(registry);
  auth_failed = &other.Add({{"reason", "unauthorized"}});
  forbidden = &other.Add({{"reason", "forbidden"}});
  bad_requests = &other.Add({{"reason", "bad_request"}});
  nats_errors = &other.Add({{"reason", "unavailable"}});
  streams_refused = &other.Add({{"reason", "too_many_streams"}});
  streams.emplace(opts.max_streams_per_team, opts.max_streams);
  events_dropped = &prometheus::BuildCounter()
                        .Name("troupe_gateway_events_dropped_total")
                        .Help("job events not sent to a slow SSE client")
                        .Register(registry)
                        .Add({});

  // A thread per open connection: SSE clients and followed logs each hold
  // one, so the pool is larger than httplib's default (the core count).
  // httplib's interface takes ownership of a raw pointer here.
  http.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  http.set_payload_max_length(opts.max_body_bytes);
  // A response goes out in more than one write (headers, then the body):
  // with Nagle's algorithm the second waits for the client's delayed ACK
  // (40 ms on Linux) on a kept-alive connection, as a browser's is.
  http.set_tcp_nodelay(true);
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    std::string route = "other";
    for (const auto& r : routes())
      if (req.method == r.method && path_matches(r.path, req.path)) route = r.path;
    requests
        ->Add({{"route", route}, {"method", req.method}, {"status", std::to_string(res.status)}})
        .Increment();
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a problem already
    // A path served with other methods (httplib answers an unrouted method
    // with 404, or 400 when it has no handler list for it at all).
    if (res.status == 404 || res.status == 400) {
      bool path_known = false, method_known = false;
      for (const auto& r : routes())
        if (path_matches(r.path, req.path)) {
          path_known = true;
          method_known = method_known || req.method == r.method;
        }
      if (path_known && !method_known) res.status = 405;
      if (!path_known && res.status == 400) res.status = 404;
    }
    const std::string code = res.status == 404   ? "not_found"
                             : res.status == 405 ? "method_not_allowed"
                             : res.status == 413 ? "too_large"
                             : res.status == 400 ? "bad_request"
                                                 : "error";
    const std::string detail = res.status == 404   ? "no route " + req.method + " " + req.path
                               : res.status == 405 ? req.method + " is not allowed on " + req.path
                                                   : "the request was refused";
    res.set_content(problem_json(res.status, code, detail), kProblemType);
  });

  // Handlers that need a caller.
  using Handler = std::function<void(const Caller&, const httplib::Request&, httplib::Response&)>;
  auto authed = [this](Handler h) {
    return [this, h](const httplib::Request& req, httplib::Response& res) {
      Caller c;
      if (authenticate(req, res, &c)) h(c, req, res);
    };
  };

  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", kJsonType);
  });
  http.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    std::string reply;
    if (!client->connection().connected()) {
      send_problem(res, 503, "unavailable", "not connected to NATS");
      return;
    }
    if (auto err = client->forward(subjects::kSysNodes, "{}", &reply); !err.empty()) {
      send_problem(res, 503, "unavailable", "the scheduler does not answer: " + err);
      return;
    }
    res.set_content("{\"status\":\"ready\"}", kJsonType);
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus::TextSerializer().Serialize(registry.Collect()),
                    "text/plain; version=0.0.4");
  });

  http.Post("/v1/session", [this](const httplib::Request& req, httplib::Response& res) {
    auto j = json_text::parse<Json>(req.body);
    std::string token = j.is_object() && j.contains("token") && j["token"].is_string()
                            ? j["token"].get<std::string>()
                            : std::string();
    bool unavailable = false;
    auto grant = token.empty() ? std::nullopt : lookup(token, &unavailable);
    if (unavailable) {
      send_problem(res, 503, "unavailable", "the token store did not answer; retry");
      return;
    }
    if (!grant) {
      auth_failed->Increment();
      send_problem(res, 401, "unauthorized", "the token is not valid");
      return;
    }
    res.status = 204;
    res.set_header("Set-Cookie", std::string(kSessionCookie) + "=" + token +
                                     "; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200");
  });
  http.Delete("/v1/session", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Set-Cookie",
                   std::string(kSessionCookie) + "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
  });
  http.Get("/v1/whoami",
           authed([](const Caller& c, const httplib::Request&, httplib::Response& res) {
             Json j{{"name", c.name}};
             if (c.admin)
               j["admin"] = true;
             else
               j["team"] = c.team;
             res.set_content(j.dump(), kJsonType);
           }));

  http.Post(
      "/v1/jobs",
      authed([this](const Caller& c, const httplib::Request& req, httplib::Response& res) {
        auto spec = json_text::parse<Json>(req.body);
        if (spec.is_discarded() || !spec.is_object()) {
          bad_requests->Increment();
          send_problem(res, 400, "malformed", "the body is not a JSON job spec");
          return;
        }
        std::string asked;
        if (auto it = spec.find("team"); it != spec.end()) {
          if (!it->is_string()) {
            bad_requests->Increment();
            send_problem(res, 400, "malformed", "team must be a string");
            return;
          }
          asked = it->get<std::string>();
        }
        std::string why;
        auto team = scope_team(c, asked, &why);
        if (!team) {
          forbidden->Increment();
          send_problem(res, 403, "wrong_team", why);
          return;
        }
        if (team->empty() || !names::check_token(*team).empty() || !names::valid_team(*team)) {
          bad_requests->Increment();
          send_problem(res, 400, "bad_request", "the spec needs a valid team");
          return;
        }
        spec["team"] = *team;
        // As troupe submit does: a spec that names its pool goes to that
        // pool's owner (no hand-over between shards); where nobody listens
        // for it, to any scheduler, which says what is wrong with it.
        std::string subject = subjects::team_submit(*team), fallback;
        if (auto it = spec.find("pool"); it != spec.end() && it->is_string() &&
                                         names::check_token(it->get<std::string>()).empty()) {
          fallback = subject;
          subject = subjects::team_submit_to(*team, it->get<std::string>());
        }
        std::string reply;
        if (!forward(subject, spec.dump(), res, &reply, 201, fallback)) return;
        auto r = json_text::parse<Json>(reply);
        if (r.is_object() && r.contains("job_id") && r["job_id"].is_string())
          res.set_header("Location", "/v1/jobs/" + r["job_id"].get<std::string>());
      }));
  http.Get("/v1/jobs",
           authed([this](const Caller& c, const httplib::Request& req, httplib::Response& res) {
             std::string team;
             if (!list_team(c, req, res, &team)) return;
             int64_t limit = 0;
             if (req.has_param("limit")) {
               const std::string l = req.get_param_value("limit");
               char* end = nullptr;
               long long v = std::strtoll(l.c_str(), &end, 10);
               if (l.empty() || *end != '\0' || v < 1) {
                 bad_requests->Increment();
                 send_problem(res, 400, "bad_request", "limit must be a positive integer");
                 return;
               }
               limit = v;
             }
             const std::string subject =
                 subjects::team_jobs(team.empty() ? std::string(names::kSysToken) : team);
             forward(subject,
                     jobs_filter_request(
                         limit, req.get_param_value("after"),
                         JobsFilter{req.get_param_value("state"), req.get_param_value("pipeline"),
                                    whole_param(req, "label"), req.get_param_value("schedule"),
                                    req.get_param_value("cluster")}),
                     res);
           }));
  // The verbs of one job: its team found (job_team), then one request.
  auto job_verb = [this, authed](std::string_view verb) {
    return authed(
        [this, verb](const Caller& c, const httplib::Request& req, httplib::Response& res) {
          std::string team;
          const std::string id = req.matches[1];
          if (job_team(c, req, id, res, &team))
            forward(subjects::team_verb(team, verb), job_request(id), res);
        });
  };
  http.Get(R"(/v1/jobs/([^/]+))", job_verb(subjects::kStatus));
  http.Delete(R"(/v1/jobs/([^/]+))", job_verb(subjects::kCancel));
  http.Get(R"(/v1/jobs/([^/]+)/why)", job_verb(subjects::kWhy));
  http.Get(R"(/v1/jobs/([^/]+)/history)", job_verb(subjects::kHistory));
  http.Get(R"(/v1/jobs/([^/]+)/logs)",
           authed([this](const Caller& c, const httplib::Request& req, httplib::Response& res) {
             logs(c, req, res);
           }));
  http.Get("/v1/queues",
           authed([this](const Caller& c, const httplib::Request& req, httplib::Response& res) {
             // ?cluster=: at a front door, that cluster's alone (troupe queues --cluster).
             const std::string cluster = req.get_param_value("cluster");
             std::string reply;
             if (!forward(subjects::kSysQueues, queues_request(cluster), res, &reply)) return;
             QueuesView q;
             if (!cluster.empty() && parse_queues(reply, &q).empty())
               if (auto err = check_queues_cluster(q, cluster); !err.empty()) {
                 bad_requests->Increment();
                 send_problem(res, 400, "bad_request", err);
                 return;
               }
             res.set_content(queues_view(reply, c.admin ? std::string() : c.team), kJsonType);
           }));
  http.Get("/v1/nodes",
           authed([this](const Caller&, const httplib::Request&, httplib::Response& res) {
             forward(subjects::kSysNodes, "{}", res);
           }));
  // An operator's node operations (admin tokens): the NATS requests of
  // troupe cordon, uncordon, drain and remove-node, with the node from the
  // path and an optional {"reason"} (cordon, drain) and ?cluster= (or
  // {"cluster"}) at a front door.
  auto node_op = [this, authed](const char* subject) {
    return authed(
        [this, subject](const Caller& c, const httplib::Request& req, httplib::Response& res) {
          if (!c.admin) {
            forbidden->Increment();
            send_problem(res, 403, "forbidden", "node operations need an admin token");
            return;
          }
          Json body = Json::object();
          if (!req.body.empty()) {
            body = json_text::parse<Json>(req.body);
            if (body.is_discarded() || !body.is_object()) {
              bad_requests->Increment();
              send_problem(res, 400, "malformed", "the body is not a JSON object");
              return;
            }
          }
          Json ask{{"node", std::string(req.matches[1])}};
          if (auto r = body.find("reason"); r != body.end()) ask["reason"] = *r;
          if (auto cl = body.find("cluster"); cl != body.end()) ask["cluster"] = *cl;
          if (req.has_param("cluster")) ask["cluster"] = req.get_param_value("cluster");
          forward(subject, ask.dump(), res);
        });
  };
  http.Post(R"(/v1/nodes/([^/]+)/cordon)", node_op(subjects::kSysCordon));
  http.Post(R"(/v1/nodes/([^/]+)/uncordon)", node_op(subjects::kSysUncordon));
  http.Post(R"(/v1/nodes/([^/]+)/drain)", node_op(subjects::kSysDrain));
  http.Delete(R"(/v1/nodes/([^/]+))", node_op(subjects::kSysRemoveNode));
  http.Get("/v1/clusters",
           authed([this](const Caller&, const httplib::Request&, httplib::Response& res) {
             std::string reply;
             bool no_front_door = false;
             if (auto err = client->clusters(&reply, &no_front_door); !err.empty()) {
               if (!no_front_door) nats_errors->Increment();
               send_problem(res, no_front_door ? 404 : 503,
                            no_front_door ? "not_found" : "unavailable", err);
               return;
             }
             res.set_content(reply, kJsonType);
           }));
  http.Get("/v1/events", authed([this](const Caller& c, const httplib::Request& req,
                                       httplib::Response& res) { events(c, req, res); }));

  // The console: its files, no token (it logs in through /v1/session).
  for (const auto& a : console_assets()) {
    std::string path = a.path == "index.html" ? "/" : "/" + a.path;
    const auto* asset = &a;
    http.Get(path, [asset](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                     "frame-ancestors 'none'");
      res.set_content(asset->body, asset->mime);
    });
  }
}

Server::Server() : impl_(std::make_unique<Impl>()) {}
Server::~Server() {
  stop();
}

std::unique_ptr<Server> Server::open(const ServerOptions& o, std::string* error) {
  std::unique_ptr<Server> s(new Server());
  s->impl_->opts = o;
  auto nats = o.nats;
  if (!nats.on_error) nats.on_error = [](const std::string&) {};
  s->impl_->client = Client::open(nats, error);
  if (!s->impl_->client) return nullptr;
  s->impl_->client->set_timeout_ms(o.request_timeout_ms);
  s->impl_->install();
  if (o.port == 0) {
    int p = s->impl_->http.bind_to_any_port(o.host.c_str());
    if (p <= 0) {
      if (error != nullptr) *error = "cannot listen on " + o.host + " (any port)";
      return nullptr;
    }
    s->impl_->port = p;
  } else {
    if (!s->impl_->http.bind_to_port(o.host.c_str(), o.port)) {
      if (error != nullptr) *error = "cannot listen on " + o.host + ":" + std::to_string(o.port);
      return nullptr;
    }
    s->impl_->port = o.port;
  }
  return s;
}

int Server::port() const {
  return impl_->port;
}

void Server::run() {
  impl_->http.listen_after_bind();
}

void Server::stop() {
  impl_->stopping.store(true);
  impl_->http.stop();
}

}  // namespace troupe::gateway::http
