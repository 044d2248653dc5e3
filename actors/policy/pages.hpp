// What one reply of a long answer holds (troupe.<team>.jobs, troupe.sys.jobs,
// troupe.<team>.history), so that no reply nears NATS max_payload (1 MiB by
// default): job lists come in pages (a limit, a stable order, "next"), a
// history drops its oldest events. Pure: unit-tested in
// tests/unit/policy_pages_test.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "messages/names.hpp"

namespace troupe::policy {

inline constexpr int64_t kDefaultPageLimit = 1000;
inline constexpr int64_t kMaxPageLimit = 5000;
// A reply's body stays under this (half the default max_payload).
inline constexpr size_t kMaxReplyBytes = 512 * 1024;

// {"limit": N, "after": "<job id>", "state": "queued"}, each optional.
struct PageRequest {
  int64_t limit = kDefaultPageLimit;  // 1..kMaxPageLimit
  std::string after;                  // the page starts after this job ("": from the first)
  std::string state;                  // only jobs in this state ("": any)
  // Only jobs with this label ("key=value"; "": any); {"pipeline": ID} is
  // the label troupe.pipeline=ID, {"schedule": NAME} troupe.schedule=NAME.
  std::string label;
};

// Reads a jobs request; "" or why it is bad. A limit above kMaxPageLimit is
// lowered to it.
inline std::string parse_page_request(const nlohmann::json& req, PageRequest* out) {
  PageRequest p;
  if (auto it = req.find("limit"); it != req.end() && !it->is_null()) {
    if (!it->is_number_integer()) return "limit must be an integer";
    auto n = it->get<int64_t>();
    if (n < 1) return "limit must be at least 1";
    p.limit = std::min(n, kMaxPageLimit);
  }
  if (auto it = req.find("after"); it != req.end() && !it->is_null()) {
    if (!it->is_string()) return "after must be a job id";
    p.after = it->get<std::string>();
    if (!p.after.empty())
      if (auto err = names::check_token(p.after); !err.empty()) return "after: " + err;
  }
  if (auto it = req.find("state"); it != req.end() && !it->is_null()) {
    if (!it->is_string()) return "state must be a string";
    p.state = it->get<std::string>();
    if (!p.state.empty() && !names::known_state(p.state)) return "unknown state '" + p.state + "'";
  }
  for (const char* key : {"label", "pipeline", "schedule"})
    if (auto it = req.find(key); it != req.end() && !it->is_null()) {
      if (!it->is_string() || it->get<std::string>().size() > 320)
        return std::string(key) + " must be a string of at most 320 bytes";
      auto v = it->get<std::string>();
      if (std::string_view(key) == "pipeline") {
        if (auto err = names::check_token(v); !err.empty()) return "pipeline: " + err;
        v = std::string(names::kPipelineLabel) + "=" + v;
      } else if (std::string_view(key) == "schedule") {
        if (auto err = names::check_token(v); !err.empty()) return "schedule: " + err;
        v = std::string(names::kScheduleLabel) + "=" + v;
      } else if (v.find('=') == std::string::npos) {
        return "label must be key=value";
      }
      if (!p.label.empty() && p.label != v) return "give one of label, pipeline and schedule";
      p.label = std::move(v);
    }
  // Which cluster a job is in is a front door's question (troupe-dispatch):
  // a scheduler serves one cluster, and does not list all of it as if it
  // were the one asked for.
  if (auto it = req.find("cluster"); it != req.end() && !it->is_null())
    return "cluster: this NATS serves one cluster; the cluster filter is a front door's "
           "(troupe-dispatch)";
  *out = std::move(p);
  return {};
}

// One page of a job list: `body` is {"jobs":[...]} with "next" when more
// remain (the JSON shape of pb::JobList, plus "next").
struct Page {
  std::string body;
  size_t count = 0;
  std::string next;  // the id of the page's last job when more remain, else ""
};

// Takes items from [first, last) in order: `keep(item)` says whether an item
// belongs in the list (a filter), `render(item)` is its JSON object's text,
// `id(item)` its job id. Stops after `limit` items, or before an item that
// would take the body past `max_bytes` (a page holds at least one item, so a
// reader always moves on). `next` is set when a kept item remains.
template <class It, class Keep, class Render, class Id>
Page take_page(It first, It last, size_t limit, size_t max_bytes, Keep keep, Render render, Id id) {
  // Room kept for the end: ],"next":"<id of at most 128 characters>"}
  constexpr size_t kTail = 160;
  Page p;
  p.body = R"({"jobs":[)";
  std::string last_id;
  bool more = false;
  for (It it = first; it != last; ++it) {
    if (!keep(*it)) continue;
    if (p.count >= limit) {
      more = true;
      break;
    }
    std::string item = render(*it);
    if (p.count > 0 && p.body.size() + 1 + item.size() + kTail > max_bytes) {
      more = true;
      break;
    }
    if (p.count > 0) p.body += ',';
    p.body += item;
    ++p.count;
    last_id = id(*it);
  }
  p.body += ']';
  if (more) {
    p.next = last_id;
    p.body += R"(,"next":)" + nlohmann::json(p.next).dump();
  }
  p.body += '}';
  return p;
}

// The reply to troupe.<team>.history: {"job_id", "events": [...]} with the
// stored events (each a JSON object's text, stream order) as they are. Texts
// that are not JSON objects are left out. When all of them would take the
// reply past `max_bytes`, the oldest are left out and "truncated": true said.
inline std::string history_reply(const std::string& job_id, const std::vector<std::string>& events,
                                 size_t max_bytes) {
  std::string head = R"({"job_id":)" + nlohmann::json(job_id).dump() + R"(,"events":[)";
  constexpr size_t kTail = 32;  // ],"truncated":true}
  std::vector<const std::string*> kept;
  for (const auto& e : events) {
    auto first = e.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || e[first] != '{' || !nlohmann::json::accept(e)) continue;
    kept.push_back(&e);
  }
  // The newest that fit, counted from the end.
  size_t size = head.size() + kTail;
  size_t from = kept.size();
  while (from > 0 && size + kept[from - 1]->size() + 1 <= max_bytes) {
    size += kept[from - 1]->size() + 1;
    --from;
  }
  std::string body = std::move(head);
  body.reserve(size);
  for (size_t i = from; i < kept.size(); ++i) {
    if (i > from) body += ',';
    body += *kept[i];
  }
  body += ']';
  if (from > 0) body += R"(,"truncated":true)";
  body += '}';
  return body;
}

}  // namespace troupe::policy
