// Role -> NATS permissions of every Troupe identity (see permissions.hpp).
#include "gateway/auth/permissions.hpp"

#include "bus/subjects.hpp"

namespace troupe::auth {
namespace {

namespace sj = troupe::subjects;

const char* const kJetStreamApi = "$JS.>";
const char* const kKv = "$KV.>";
const char* const kSysAll = "troupe.sys.>";

std::string identity(std::string_view prefix, std::string_view name) {
  return std::string(prefix) + std::string(name);
}

void add_node(Permissions& p, std::string_view node) {
  p.pub_allow.push_back(sj::agent_to_scheduler(node, ">"));
  p.sub_allow.push_back(sj::scheduler_to_agent(node, ">"));
}

// Every team's request verbs but enqueue (a front for many teams).
void add_team_verbs_but_enqueue(Permissions& p) {
  for (auto verb : sj::kTeamVerbs)
    if (verb != sj::kEnqueue) p.pub_allow.push_back(sj::team_verb("*", verb));
  p.pub_allow.emplace_back(sj::kAllPoolSubmit);
}

}  // namespace

Permissions team_permissions(std::string_view team) {
  Permissions p;
  for (auto verb : sj::kTeamVerbs) p.pub_allow.push_back(sj::team_verb(team, verb));
  p.pub_allow.push_back(sj::team_submit_to(team, "*"));  // addressed to a pool
  const std::string events = sj::team_verb(team, sj::kEvents) + ".>";
  p.pub_deny = {events, kJetStreamApi, kKv, kSysAll};
  // Only these two may be subscribed to; a deny list would add a check on
  // every message delivered to those wildcards, for nothing they could match.
  p.sub_allow = {sj::inbox_prefix(identity(sj::kTeamIdentityPrefix, team)) + ".>", events};
  p.max_subs = kTeamMaxSubs;
  return p;
}

Permissions node_permissions(std::string_view node) {
  Permissions p;
  add_node(p, node);
  p.pub_allow.push_back(sj::node_log_chunks(node));  // its workers' output (TROUPE_LOGS_<team>)
  p.sub_allow.emplace_back(sj::kSysHello);
  p.allow_responses = true;
  return p;
}

std::string fleet_member_name(std::string_view prefix, int i, int count) {
  int width = 5;
  for (long long c = 100000; c <= count; c *= 10) ++width;
  std::string digits = std::to_string(i);
  if (static_cast<int>(digits.size()) < width)
    digits.insert(0, static_cast<std::size_t>(width) - digits.size(), '0');
  return std::string(prefix) + "-" + digits;
}

Permissions fleet_permissions(std::string_view prefix, int count) {
  Permissions p;
  for (int i = 1; i <= count; ++i) add_node(p, fleet_member_name(prefix, i, count));
  p.sub_allow.emplace_back(sj::kSysHello);
  p.allow_responses = true;
  return p;
}

// Everything: no list (an unrestricted user; see user_nats_claims).
Permissions scheduler_permissions() {
  return Permissions{};
}

Permissions admin_permissions(std::string_view name) {
  Permissions p;
  for (auto verb : sj::kTeamVerbs) p.pub_allow.push_back(sj::team_verb("*", verb));
  p.pub_allow.emplace_back(sj::kAllPoolSubmit);
  p.pub_allow.push_back(sj::team_verb("sys", sj::kJobs));
  p.pub_allow.push_back(sj::team_verb("sys", sj::kUsage));
  for (const char* s :
       {sj::kSysNodes, sj::kSysQueues, sj::kSysStats, sj::kSysCordon, sj::kSysUncordon,
        sj::kSysDrain, sj::kSysRemoveNode, sj::kSysFind, sj::kSysDebugCrash, sj::kSysClusters})
    p.pub_allow.emplace_back(s);
  p.pub_deny = {sj::kAllEvents, kJetStreamApi,        kKv, sj::kAllAgents, "troupe.sys.node.>",
                sj::kSysHello,  "troupe.sys.intake.>"};
  p.sub_allow = {sj::inbox_prefix(identity(sj::kAdminIdentityPrefix, name)) + ".>", sj::kAllEvents};
  return p;
}

Permissions gateway_permissions() {
  Permissions p;
  add_team_verbs_but_enqueue(p);
  // (cordon, uncordon, drain and remove_node: for admin tokens only; the
  // gateway checks the token)
  for (const char* s : {sj::kSysNodes, sj::kSysQueues, sj::kSysFind, sj::kSysClusters,
                        sj::kSysCordon, sj::kSysUncordon, sj::kSysDrain, sj::kSysRemoveNode})
    p.pub_allow.emplace_back(s);
  // Read-only on the token bucket: the stream's info (binding to the bucket)
  // and getting one message, direct or through the stream API. Nothing else of
  // JetStream: an unlisted subject is denied.
  const std::string stream = std::string("KV_") + sj::kTokenBucket;
  p.pub_allow.push_back("$JS.API.STREAM.INFO." + stream);
  p.pub_allow.push_back("$JS.API.STREAM.MSG.GET." + stream);
  p.pub_allow.push_back("$JS.API.DIRECT.GET." + stream);
  p.pub_allow.push_back("$JS.API.DIRECT.GET." + stream + ".>");
  p.sub_allow = {sj::inbox_prefix(sj::kGatewayIdentity) + ".>", sj::kAllEvents};
  return p;
}

Permissions dispatch_permissions() {
  Permissions p;
  add_team_verbs_but_enqueue(p);
  // (cordon, uncordon, drain and remove_node: an admin's at the front door,
  // handed on)
  for (const char* s : {sj::kSysNodes, sj::kSysQueues, sj::kSysCordon, sj::kSysUncordon,
                        sj::kSysDrain, sj::kSysRemoveNode})
    p.pub_allow.emplace_back(s);
  // Its answers to claims, whose reply subjects are made for it (not
  // allow_responses: a leaf node link carries only what its permissions list).
  p.pub_allow.push_back(std::string(sj::kSysDispatchAnswer) + ".*");
  p.sub_allow = {sj::inbox_prefix(sj::kDispatchIdentity) + ".>", sj::kAllEvents,
                 sj::kSysDispatchClaim};
  return p;
}

}  // namespace troupe::auth
