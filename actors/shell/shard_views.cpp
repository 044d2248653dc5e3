#include "actors/shell/shard_views.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "actors/errors.hpp"
#include "actors/policy/pages.hpp"
#include "actors/policy/shards.hpp"
#include "bus/subjects.hpp"
#include "messages/json_text.hpp"

namespace troupe::shell {

using nlohmann::json;

ShardViews::ShardViews(bus::Connection& in, bus::Connection& out, std::vector<std::string> pools,
                       int part_timeout_ms)
    : out_(out), pools_(std::move(pools)), part_timeout_ms_(part_timeout_ms) {
  for (const char* s : {subjects::kSysNodes, subjects::kSysQueues, subjects::kAllJobs}) {
    auto sub = in.subscribe(s, [this](Inbound&& m) {
      if (m.reply.empty()) return;
      if (!work_.post(m))
        out_.publish(m.reply, errors::error_json(errors::kUnavailable,
                                                 "too many views being put together; retry"));
    });
    if (!sub) {
      spdlog::error("cannot subscribe to {}", s);
      ok_ = false;
    }
    subs_.push_back(std::move(sub));
  }
}

ShardViews::~ShardViews() {
  subs_.clear();
  work_.close();
}

std::string ShardViews::part(const std::string& subject, const std::string& pool,
                             const std::string& request) {
  json body{{"subject", subject}, {"pool", pool}};
  body["request"] = json_text::parse<json>(request.empty() ? std::string("{}") : request);
  std::string err;
  auto r = out_.request(subjects::kSysShardPart, body.dump(), part_timeout_ms_, &err);
  return r ? std::string(r->begin(), r->end()) : std::string();
}

void ShardViews::run(Inbound& in) {
  const std::string request(in.data.begin(), in.data.end());
  std::vector<std::string> missing;
  if (in.subject == subjects::kSysNodes || in.subject == subjects::kSysQueues) {
    std::vector<std::pair<std::string, std::string>> parts;
    for (const auto& pool : pools_) {
      auto text = part(in.subject, pool, request);
      if (text.empty())
        missing.push_back(pool);
      else
        parts.emplace_back(pool, std::move(text));
    }
    std::vector<std::string> keys = in.subject == subjects::kSysNodes
                                        ? std::vector<std::string>{"nodes"}
                                        : std::vector<std::string>{"pools", "teams"};
    out_.publish(in.reply, policy::merge_pool_parts(keys, parts, missing));
    return;
  }
  // A jobs list: the jobs of no pool's id first, then each pool's, each in
  // submit order; "after" names the job the page starts after, so the
  // pages go on from its pool.
  json req = json_text::parse<json>(request.empty() ? std::string("{}") : request);
  policy::PageRequest page;
  std::string err = req.is_object() ? policy::parse_page_request(req, &page)
                                    : std::string("request is not a JSON object");
  if (!err.empty()) {
    out_.publish(in.reply, errors::error_json(errors::kBadRequest, err));
    return;
  }
  std::vector<std::string> order{""};
  order.insert(order.end(), pools_.begin(), pools_.end());
  size_t from = 0;
  if (!page.after.empty()) {
    auto pool = policy::pool_of_job_id(pools_, page.after);
    from = static_cast<size_t>(std::find(order.begin(), order.end(), pool) - order.begin());
  }
  json jobs = json::array();
  std::string next;
  size_t bytes = 0;
  for (size_t i = from; i < order.size(); ++i) {
    const int64_t left = page.limit - static_cast<int64_t>(jobs.size());
    if (left <= 0 || bytes >= policy::kMaxReplyBytes / 2) {
      // Full: the next page starts after its last job.
      if (!jobs.empty()) next = jobs.back().value("job_id", "");
      break;
    }
    json sub = req;
    sub["limit"] = left;
    sub["after"] = i == from ? page.after : std::string();
    auto text = part(in.subject, order[i], sub.dump());
    json j = json_text::parse<json>(text);
    if (!j.is_object()) {
      if (!order[i].empty()) missing.push_back(order[i]);
      continue;
    }
    if (j.contains("error")) {  // (a bad "after" of this pool's owner)
      out_.publish(in.reply, text);
      return;
    }
    bytes += text.size();
    for (auto& row : j.value("jobs", json::array())) jobs.push_back(std::move(row));
    if (j.contains("next")) {  // this pool has more: the page ends here
      next = j["next"].get<std::string>();
      break;
    }
  }
  json out{{"jobs", std::move(jobs)}};
  if (!next.empty()) out["next"] = next;
  if (!missing.empty()) out["missing_pools"] = missing;
  out_.publish(in.reply, out.dump());
}

}  // namespace troupe::shell
