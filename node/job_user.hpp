// The user a team's jobs run as: troupe-<team>, a system user with its own
// group and the same uid on every node (derived from the team's name), made
// with useradd on first use; or the uid the cluster config maps the team to
// (run_as, sent in the Launch). Never root, never the agent's own user.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <optional>
#include <string>

namespace troupe::node {

struct JobUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;  // "" for a run_as uid with no passwd entry
};

// The uid troupe-<team> gets: the same on every node for the same team (a
// hash of the name into [kTeamUidBase, kTeamUidBase + kTeamUidSpan)). Pure.
inline constexpr uid_t kTeamUidBase = 200000;
inline constexpr uid_t kTeamUidSpan = 800000;
uid_t team_uid(const std::string& team);
std::string team_user_name(const std::string& team);  // "troupe-<team>"

// Resolves (and creates, when missing) the users jobs run as. Thread-safe:
// useradd runs one at a time.
class JobUsers {
 public:
  // `run_as_uid` >= 0: that uid (refused when 0 or `agent_uid`); else the
  // team's own user, created when missing. nullopt and *error when neither
  // works.
  std::optional<JobUser> resolve(const std::string& team, long long run_as_uid, std::string* error);
  void set_agent_uid(uid_t uid) { agent_uid_ = uid; }

 private:
  std::mutex mu_;
  uid_t agent_uid_ = 0;
};

}  // namespace troupe::node
