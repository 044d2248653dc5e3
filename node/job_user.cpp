// Owns the job users: the team user's name and uid, their creation with
// useradd, and the checks on a run_as uid.
#include "node/job_user.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "node/isolation.hpp"
#include "node/process.hpp"

namespace troupe::node {

namespace {

// What useradd accepts everywhere: [a-z_][a-z0-9_-]*, at most 32 characters.
bool plain_name(const std::string& team) {
  if (team.empty() || team.size() > 25) return false;
  for (char c : team)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

std::optional<JobUser> by_name(const std::string& name) {
  struct passwd pw {
  }, *out = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &out) != 0 || out == nullptr)
    return std::nullopt;
  return JobUser{pw.pw_uid, pw.pw_gid, pw.pw_name};
}

std::optional<JobUser> by_uid(uid_t uid) {
  struct passwd pw {
  }, *out = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &out) != 0 || out == nullptr)
    return std::nullopt;
  return JobUser{pw.pw_uid, pw.pw_gid, pw.pw_name};
}

}  // namespace

uid_t team_uid(const std::string& team) {
  return kTeamUidBase + stable_hash(team) % kTeamUidSpan;
}

std::string team_user_name(const std::string& team) {
  if (plain_name(team)) return "troupe-" + team;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", stable_hash(team));
  return std::string("troupe-t") + hex;
}

std::optional<JobUser> JobUsers::resolve(const std::string& team, long long run_as_uid,
                                         std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<JobUser> {
    if (error != nullptr) *error = why;
    return std::nullopt;
  };
  if (run_as_uid >= 0) {
    if (run_as_uid == 0) return fail("run_as uid 0 (root) is refused: jobs never run as root");
    if (run_as_uid > 0x7fffffffLL)
      return fail("run_as uid " + std::to_string(run_as_uid) + " is out of range");
    auto uid = static_cast<uid_t>(run_as_uid);
    if (uid == agent_uid_)
      return fail("run_as uid " + std::to_string(uid) + " is the node agent's own");
    if (auto u = by_uid(uid)) return u;
    return JobUser{uid, static_cast<gid_t>(uid), ""};  // an id with no name: its own group id
  }
  if (team.empty()) return fail("the launch names no team");
  const std::string name = team_user_name(team);
  std::lock_guard<std::mutex> lock(mu_);
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (auto u = by_name(name)) {
      if (u->uid == 0 || u->uid == agent_uid_)
        return fail("user " + name + " has uid " + std::to_string(u->uid) +
                    " (root or the agent's): refused");
      return u;
    }
    // The team's uid, or the next free one after it (the same choice on every
    // node whose user table agrees).
    uid_t want = team_uid(team);
    for (uid_t i = 0; i < 1000 && by_uid(want); ++i)
      want = kTeamUidBase + (want - kTeamUidBase + 1) % kTeamUidSpan;
    // Its group gets the same id where it is free (the same on every node).
    if (::getgrnam(name.c_str()) == nullptr) {
      std::vector<std::string> groupadd = {"groupadd", "--system"};
      if (::getgrgid(want) == nullptr)
        groupadd.insert(groupadd.end(), {"--gid", std::to_string(want)});
      groupadd.push_back(name);
      (void)run_tool(groupadd);
    }
    int rc = run_tool({"useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                       "--shell", "/usr/sbin/nologin", "--gid", name, "--uid", std::to_string(want),
                       name});
    if (rc == 0) continue;  // read it back above
    if (rc < 0)
      return fail("cannot run useradd to create " + name + " (is the passwd package installed?)");
    // Another agent on this host may be creating it now (passwd locked, or
    // the name just appeared): look again shortly.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return fail("cannot create the job user " + name + " (useradd failed)");
}

}  // namespace troupe::node
