// What the front door (troupe-dispatch, gateway/dispatch/policy.hpp) reads
// from others: a team's jobs and queues requests, a cluster's
// troupe.sys.nodes / troupe.sys.queues replies, its job events and history
// replies, a place read back from TROUPE_DISPATCH, and the operator's config.
// Input: a selector byte, then up to three parts separated by "\n\x1e\n".
// The front door's handlers catch an exception and count it malformed
// (Front::guard), so one here is not a crash; memory errors, undefined
// behaviour, hangs and these invariants are: a place read back is written
// as it was read; a jobs page has at most the limit asked (5,000 at most)
// and only rows of the cluster asked; queues asked for one cluster name it
// or say why not; every reply serializes to JSON (dump_json).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/dispatch/policy.hpp"
#include "tests/fuzz/walk.hpp"

namespace {

using nlohmann::json;
using troupe::fuzz::check;
namespace dp = troupe::dispatch;

std::vector<std::string_view> parts_of(std::string_view in) {
  static constexpr std::string_view kSep = "\n\x1e\n";
  std::vector<std::string_view> parts;
  while (parts.size() < 2) {
    size_t n = in.find(kSep);
    if (n == std::string_view::npos) break;
    parts.push_back(in.substr(0, n));
    in.remove_prefix(n + kSep.size());
  }
  parts.push_back(in);
  while (parts.size() < 3) parts.emplace_back();
  return parts;
}

json parse(std::string_view text) {
  return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

size_t dumped(const json& j) {
  return dp::dump_json(j).size();
}

// A place read back from TROUPE_DISPATCH (a front door restarting; the KV
// bucket is the front door's own, but a damaged or older value must not
// crash it): written again as read; its view, claims and retention.
size_t place(std::string_view text, std::string_view event) {
  auto p = dp::place_from_json(text);
  if (!p) return 0;
  const std::string once = dp::to_json(*p);
  auto again = dp::place_from_json(once);
  check(again.has_value(), "a place written by to_json does not read back");
  check(dp::to_json(*again) == once, "a place read back is not written as it was read");
  const json last = parse(event);
  size_t n = dumped(dp::job_view(*p, last, true)) + dumped(dp::job_view(*p, last, false));
  n += dumped(dp::find_reply(dp::job_view(*p, last, true)));
  n += static_cast<size_t>(dp::event_ms(last) & 0xff);
  auto a = dp::answer_claim(&*p, p->cluster, p->cluster_job_id, 1000, 500);
  check(!(a.granted && a.withdrawn), "a claim both granted and withdrawn");
  n += a.reason.size() + dp::is_live(*p) + dp::past_retention(*p, 1'800'000'000'000, 3'600'000);
  return n;
}

// A cluster's troupe.sys.nodes and troupe.sys.queues replies (a cluster's
// scheduler may be compromised), put together with a team's queues request.
size_t capacity(std::string_view nodes, std::string_view queues, std::string_view body) {
  dp::ClusterState c1;
  std::string err;
  if (!dp::read_capacity(nodes, queues, &c1, &err)) {
    check(!err.empty(), "capacity refused without a reason");
    return err.size();
  }
  c1.name = "c1";
  c1.reachable = true;
  dp::ClusterState c2 = c1;  // the same replies from another cluster: summed
  c2.name = "c2";
  dp::ClusterState c3;  // never answered
  c3.name = "c3";
  const std::vector<dp::ClusterState> all{c1, c2, c3};
  check(c1.queued >= 0 && c1.running >= 0, "a negative count of jobs");
  for (const auto& [type, cap] : c1.types)
    check(cap.total >= 0 && cap.free >= 0, "a negative count of GPUs");
  size_t n = dumped(dp::merge_nodes(all)) + dumped(dp::merge_queues(all));
  std::string code;
  const json q = dp::queues_reply(all, body, &code);
  n += dumped(q);
  const json req = parse(body);
  if (code.empty() && req.is_object() && req.contains("cluster") && req["cluster"].is_string() &&
      !req["cluster"].get<std::string>().empty())
    check(q.value("cluster", std::string()) == req["cluster"].get<std::string>(),
          "queues for one cluster do not name it");
  if (!code.empty())
    check(q.contains("error") && q.value("code", std::string()) == code,
          "a refused queues request without its error");
  for (const auto& [type, cap] : c1.types) n += type.size() + static_cast<size_t>(cap.total & 1);
  n += dp::clusters_with_node(all, std::string(body.substr(0, 64))).size();
  return n;
}

// troupe.<team>.jobs at the front door: its rows (as job_view makes them,
// here any JSON) and a team's request.
size_t page(std::string_view rows_text, std::string_view request_text) {
  std::vector<json> rows;
  const json r = parse(rows_text);
  if (r.is_array())
    for (const auto& row : r) rows.push_back(row);
  const json req = parse(request_text);
  const json out = dp::jobs_page(rows, req.is_discarded() ? json::object() : req);
  size_t n = dumped(out);
  if (auto jobs = out.find("jobs"); jobs != out.end()) {
    check(jobs->is_array(), "a jobs page whose jobs are not a list");
    check(jobs->size() <= 5000, "a jobs page of more than 5,000 rows");
    const std::string cluster = dp::string_of(req, "cluster");
    if (!cluster.empty())
      for (const auto& row : *jobs)
        check(dp::string_of(row, "cluster") == cluster, "a row of another cluster than asked");
    if (req.is_object() && req.contains("limit") && req["limit"].is_number_integer()) {
      const auto limit = req["limit"].get<int64_t>();
      if (limit >= 1) check(static_cast<int64_t>(jobs->size()) <= limit, "more rows than asked");
    }
  }
  return n;
}

// A job's history replies from the clusters its copies went to.
size_t history(std::string_view a, std::string_view b, std::string_view id) {
  std::vector<dp::HistoryPart> parts;
  parts.push_back({"c1/j-1", parse(a)});
  parts.push_back({"c2/j-2", std::nullopt});
  parts.push_back({"c2/j-3", parse(b)});
  return dumped(dp::merge_history(std::string(id.substr(0, 64)), parts));
}

size_t config(std::string_view text) {
  std::string err;
  auto cfg = dp::parse_config(text, &err);
  if (!cfg) {
    check(!err.empty(), "a config refused without a reason");
    return err.size();
  }
  return cfg->clusters.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t pick = data[0];
  const auto parts = parts_of(troupe::fuzz::text(data + 1, size - 1));
  volatile size_t sink = 0;
  try {
    switch (pick % 5) {
      case 0:
        sink = place(parts[0], parts[1]);
        break;
      case 1:
        sink = capacity(parts[0], parts[1], parts[2]);
        break;
      case 2:
        sink = page(parts[0], parts[1]);
        break;
      case 3:
        sink = history(parts[0], parts[1], parts[2]);
        break;
      default:
        sink = config(parts[0]);
        break;
    }
  } catch (const std::exception&) {
    // Front::guard: counted malformed, answered with an error.
  }
  (void)sink;
  return 0;
}
