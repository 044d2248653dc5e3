// The NATS permissions of each Troupe identity (docs/security.md): which
// subjects a team, a node agent, a simulated fleet, an admin and the
// scheduler may publish and subscribe to. Pure functions of the role and its
// name, built from the subject constants of bus/subjects.hpp; the user JWTs
// (gateway/auth/jwt.hpp) carry them and nats-server enforces them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe::auth {

struct Permissions {
  std::vector<std::string> pub_allow, pub_deny, sub_allow, sub_deny;
  // Allow publishing to the reply subject of a request received (any
  // subject, once per request: jwt ResponsePermission {max: 1, ttl: 0}).
  bool allow_responses = false;
  int responses_max = 1;
  // Subscriptions one connection of the identity may hold (jwt "subs"; -1:
  // no limit). nats-server refuses one more with "maximum subscriptions
  // exceeded"; the connection and its other subscriptions stay.
  int max_subs = -1;
};

// A team's connection holds at most this many subscriptions: a client needs
// a few (its reply inbox, a wildcard on its events), and each one costs the
// server memory every team shares.
inline constexpr int kTeamMaxSubs = 1000;

// team-<team>: requests troupe.<team>.<verb> (every verb in
// subjects::kTeamVerbs); reads its own reply inbox _INBOX_<team>.> and its
// jobs' events troupe.<team>.events.>; never JetStream, $KV or troupe.sys.
Permissions team_permissions(std::string_view team);

// node-<node>: publishes troupe.sys.agent.<node>.>; reads
// troupe.sys.node.<node>.> and troupe.sys.hello; may answer requests (logs).
Permissions node_permissions(std::string_view node);

// fleet-<prefix> of `count` simulated agents: node_permissions of every member
// fleet_member_name(prefix, 1..count, count), as explicit lists.
Permissions fleet_permissions(std::string_view prefix, int count);

// Name of fleet member `i` (1-based) of `count`: "<prefix>-00001"; at least
// five digits, more when `count` needs them (the rule of
// node/options.hpp fleet_node_name, which troupe-node uses).
std::string fleet_member_name(std::string_view prefix, int i, int count);

// scheduler: everything (it owns troupe.sys, the events and JetStream).
Permissions scheduler_permissions();

// admin-<name>: every team's verbs (troupe.*.<verb>) and the troupe.sys
// request verbs (jobs, nodes, queues, stats, cordon, uncordon, drain, find,
// debug.crash); reads _INBOX_admin-<name>.> and every team's events. Never
// the agent/node/hello/intake subjects or JetStream.
Permissions admin_permissions(std::string_view name);

// gateway (troupe-gateway, the HTTP API): every team's request verbs but
// enqueue, troupe.sys.jobs, nodes, queues and find; reads _INBOX_gateway.>
// and every team's events; of JetStream only reading the token bucket. Which
// team a request may act for is the bearer token's (checked by the gateway).
Permissions gateway_permissions();

// dispatch.creds in a cluster: the identity a front door's leaf node link
// (docs/clusters.md) signs in with there. It may publish every team verb but
// enqueue and ask troupe.sys.nodes/queues; it receives its inbox, every
// team's events and its schedulers' troupe.sys.dispatch.claim, and answers
// those claims on troupe.sys.dispatch.answer.*. Nothing of JetStream.
Permissions dispatch_permissions();

}  // namespace troupe::auth
