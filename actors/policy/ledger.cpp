#include "actors/policy/ledger.hpp"

#include <cstdlib>
#include <set>

#include "messages/names.hpp"

namespace troupe::policy {

std::string hold_id(const std::string& job_id, int attempt, int rank) {
  return job_id + "/" + std::to_string(attempt) + "/" + std::to_string(rank);
}

bool parse_hold_id(const std::string& id, std::string* job_id, int* attempt, int* rank) {
  auto b = id.rfind('/');
  if (b == std::string::npos || b == 0) return false;
  auto a = id.rfind('/', b - 1);
  if (a == std::string::npos || a == 0 || b - a < 2 || b + 1 == id.size()) return false;
  char* end = nullptr;
  long at = std::strtol(id.c_str() + a + 1, &end, 10);
  if (end != id.c_str() + b) return false;
  long rk = std::strtol(id.c_str() + b + 1, &end, 10);
  if (*end != '\0' || at < 0 || rk < 0 || at > 1000000 || rk > 1000000) return false;
  *job_id = id.substr(0, a);
  *attempt = static_cast<int>(at);
  *rank = static_cast<int>(rk);
  return true;
}

void Ledger::resize(int gpus, int cpus, int64_t memory_mb) {
  gpus_total = gpus;
  cpus_total = cpus;
  memory_total_mb = memory_mb;
  if (static_cast<int>(gpu_owner.size()) < gpus) gpu_owner.resize(static_cast<size_t>(gpus));
  // Shrinking keeps indices that are held: they are freed on release.
}

int Ledger::gpus_free() const {
  int n = 0;
  for (int i = 0; i < gpus_total && i < static_cast<int>(gpu_owner.size()); ++i)
    n += gpu_owner[static_cast<size_t>(i)].empty() ? 1 : 0;
  return n;
}

int Ledger::gpus_reserved() const {
  int n = 0;
  for (const auto& [id, h] : holds) n += h.committed ? 0 : static_cast<int>(h.gpus.size());
  return n;
}

int Ledger::gpus_allocated() const {
  int n = 0;
  for (const auto& [id, h] : holds) n += h.committed ? static_cast<int>(h.gpus.size()) : 0;
  return n;
}

int Ledger::cpus_free() const {
  int used = 0;
  for (const auto& [id, h] : holds) used += h.cpus;
  return cpus_total - used;
}

int64_t Ledger::memory_free_mb() const {
  int64_t used = 0;
  for (const auto& [id, h] : holds) used += h.memory_mb;
  return memory_total_mb - used;
}

Verdict reserve(Ledger& l, const std::string& id, const Hold& want, int64_t now_ms,
                int64_t lease_ms) {
  Verdict v;
  if (auto it = l.holds.find(id); it != l.holds.end()) {
    if (it->second.committed) {
      v.reason = "already allocated";
      return v;
    }
    release(l, id);
  }
  int need = static_cast<int>(want.gpus.size());
  if (l.gpus_free() < need) {
    v.reason = "not enough free GPUs (" + std::to_string(l.gpus_free()) + " free, " +
               std::to_string(need) + " asked)";
    return v;
  }
  if (want.cpus > 0 && l.cpus_free() < want.cpus) {
    v.reason = "not enough free CPUs";
    return v;
  }
  if (want.memory_mb > 0 && l.memory_free_mb() < want.memory_mb) {
    v.reason = "not enough free memory";
    return v;
  }
  Hold h = want;
  h.gpus.clear();
  for (int i = 0; i < l.gpus_total && static_cast<int>(h.gpus.size()) < need; ++i) {
    auto& owner = l.gpu_owner[static_cast<size_t>(i)];
    if (owner.empty()) {
      owner = id;
      h.gpus.push_back(i);
    }
  }
  h.expires_ms = now_ms + lease_ms;
  h.committed = false;
  v.ok = true;
  v.gpus = h.gpus;
  l.holds[id] = std::move(h);
  return v;
}

Verdict commit(Ledger& l, const std::string& id, int64_t now_ms) {
  Verdict v;
  auto it = l.holds.find(id);
  if (it == l.holds.end()) {
    v.reason = "no reservation (released or expired)";
    return v;
  }
  if (!it->second.committed && it->second.expires_ms < now_ms) {
    release(l, id);
    v.reason = "the lease expired";
    return v;
  }
  it->second.committed = true;
  it->second.expires_ms = 0;
  v.ok = true;
  v.gpus = it->second.gpus;
  return v;
}

bool release(Ledger& l, const std::string& id) {
  auto it = l.holds.find(id);
  if (it == l.holds.end()) return false;
  for (int g : it->second.gpus) {
    if (g >= 0 && g < static_cast<int>(l.gpu_owner.size()) &&
        l.gpu_owner[static_cast<size_t>(g)] == id)
      l.gpu_owner[static_cast<size_t>(g)].clear();
  }
  l.holds.erase(it);
  return true;
}

std::vector<std::string> expire(Ledger& l, int64_t now_ms) {
  std::vector<std::string> gone;
  for (const auto& [id, h] : l.holds)
    if (!h.committed && h.expires_ms < now_ms) gone.push_back(id);
  for (const auto& id : gone) release(l, id);
  return gone;
}

std::string check_invariants(const Ledger& l) {
  std::set<int> seen;
  for (const auto& [id, h] : l.holds) {
    for (int g : h.gpus) {
      if (!seen.insert(g).second) return "GPU " + std::to_string(g) + " held twice";
      if (g < 0 || g >= static_cast<int>(l.gpu_owner.size()))
        return "GPU index " + std::to_string(g) + " out of range";
      if (l.gpu_owner[static_cast<size_t>(g)] != id)
        return "GPU " + std::to_string(g) + " owner mismatch";
    }
  }
  for (size_t i = 0; i < l.gpu_owner.size(); ++i)
    if (!l.gpu_owner[i].empty() && !seen.count(static_cast<int>(i)))
      return "GPU " + std::to_string(i) + " owned by a missing hold";
  return {};
}

bool hold_needs_check(const Hold& h, int64_t now_ms, int64_t check_ms) {
  if (!h.committed || (h.launched && !h.exited)) return false;
  return now_ms - h.changed_ms >= check_ms && now_ms - h.checked_ms >= check_ms;
}

HoldAnswer judge_hold(const JobSide& job, const HoldSide& hold) {
  bool active = job.state == names::kStarting || job.state == names::kRunning;
  if (!active || hold.attempt != job.attempt || job.node_of_rank != hold.node)
    return HoldAnswer::release;
  if (!hold.launched && !job.rank_started) return HoldAnswer::relaunch;
  return HoldAnswer::keep;
}

}  // namespace troupe::policy
