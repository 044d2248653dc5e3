#include "actors/policy/ledger.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "messages/names.hpp"

namespace troupe::policy {

namespace {
bool shared(const Ledger& l, int i) {
  return i >= 0 && i < static_cast<int>(l.shared_mb.size()) &&
         l.shared_mb[static_cast<size_t>(i)] > 0;
}

// The GPU a shared worker takes: the shared GPU of its key it fills best
// (least memory left), else the first free one; -1 when none.
int shared_gpu_for(const Ledger& l, const Hold& want) {
  int best = -1;
  int64_t best_left = 0;
  for (int i = 0; i < l.gpus_total && i < static_cast<int>(l.shared_mb.size()); ++i) {
    auto k = static_cast<size_t>(i);
    if (!shared(l, i) || !l.gpu_owner[k].empty() || l.shared_key[k] != want.share_key) continue;
    int64_t left = l.gpu_memory_mb - l.shared_mb[k] - want.gpu_memory_mb;
    if (left >= 0 && (best < 0 || left < best_left)) {
      best = i;
      best_left = left;
    }
  }
  if (best >= 0) return best;
  for (int i = 0; i < l.gpus_total && i < static_cast<int>(l.gpu_owner.size()); ++i)
    if (l.gpu_owner[static_cast<size_t>(i)].empty() && !shared(l, i)) return i;
  return -1;
}
}  // namespace

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
  if (shared_mb.size() < gpu_owner.size()) {
    shared_mb.resize(gpu_owner.size());
    shared_key.resize(gpu_owner.size());
  }
  // Shrinking keeps indices that are held: they are freed on release.
}

int Ledger::gpus_free() const {
  int n = 0;
  for (int i = 0; i < gpus_total && i < static_cast<int>(gpu_owner.size()); ++i)
    n += gpu_owner[static_cast<size_t>(i)].empty() && !shared(*this, i) ? 1 : 0;
  return n;
}

int Ledger::gpus_reserved() const {
  int n = 0;
  for (const auto& [id, h] : holds)
    n += h.committed || h.gpu_memory_mb > 0 ? 0 : static_cast<int>(h.gpus.size());
  return n;
}

// A shared GPU counts as allocated, whatever its holds' leases.
int Ledger::gpus_allocated() const {
  int n = 0;
  for (const auto& [id, h] : holds)
    n += h.committed && h.gpu_memory_mb == 0 ? static_cast<int>(h.gpus.size()) : 0;
  for (int i = 0; i < static_cast<int>(shared_mb.size()); ++i) n += shared(*this, i) ? 1 : 0;
  return n;
}

std::vector<SharedGpu> Ledger::shared_gpus() const {
  std::vector<SharedGpu> out;
  for (int i = 0; i < static_cast<int>(shared_mb.size()); ++i)
    if (shared(*this, i))
      out.push_back(
          SharedGpu{i, shared_mb[static_cast<size_t>(i)], shared_key[static_cast<size_t>(i)]});
  return out;
}

void claim(Ledger& l, const std::string& id, Hold h) {
  for (int g : h.gpus) {
    if (g < 0 || g >= kMaxGpuIndex) continue;
    auto i = static_cast<size_t>(g);
    // A node known only from its jobs (rebuilt before its agent spoke) has
    // no inventory yet: its holds still own their indices.
    if (i >= l.gpu_owner.size()) l.gpu_owner.resize(i + 1);
    if (i >= l.shared_mb.size()) {
      l.shared_mb.resize(l.gpu_owner.size());
      l.shared_key.resize(l.gpu_owner.size());
    }
    if (h.gpu_memory_mb > 0) {
      l.shared_mb[i] += h.gpu_memory_mb;
      l.shared_key[i] = h.share_key;
    } else {
      l.gpu_owner[i] = id;
    }
  }
  l.holds[id] = std::move(h);
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
  bool sharing = want.gpu_memory_mb > 0;
  int shared_at = -1;
  if (sharing) {
    if (need != 1) {
      v.reason = "a shared worker holds part of exactly one GPU";
      return v;
    }
    if (l.gpu_memory_mb <= want.gpu_memory_mb) {
      v.reason = l.gpu_memory_mb <= 0
                     ? "this node's GPU memory is unknown: it takes no shared job"
                     : "asks for " + std::to_string(want.gpu_memory_mb) + " MB of a " +
                           std::to_string(l.gpu_memory_mb) + " MB GPU: not a share of it";
      return v;
    }
    shared_at = shared_gpu_for(l, want);
    if (shared_at < 0) {
      v.reason = "no GPU with " + std::to_string(want.gpu_memory_mb) + " MB to share";
      return v;
    }
  } else if (l.gpus_free() < need) {
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
  if (sharing) h.gpus.push_back(shared_at);
  for (int i = 0; !sharing && i < l.gpus_total && static_cast<int>(h.gpus.size()) < need; ++i)
    if (l.gpu_owner[static_cast<size_t>(i)].empty() && !shared(l, i)) h.gpus.push_back(i);
  h.expires_ms = now_ms + lease_ms;
  h.committed = false;
  v.ok = true;
  v.gpus = h.gpus;
  claim(l, id, std::move(h));
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
    if (g < 0 || g >= static_cast<int>(l.gpu_owner.size())) continue;
    auto i = static_cast<size_t>(g);
    if (it->second.gpu_memory_mb > 0 && i < l.shared_mb.size()) {
      l.shared_mb[i] = std::max<int64_t>(0, l.shared_mb[i] - it->second.gpu_memory_mb);
      if (l.shared_mb[i] == 0) l.shared_key[i].clear();
    } else if (l.gpu_owner[i] == id) {
      l.gpu_owner[i].clear();
    }
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
  std::map<int, int64_t> shared_sum;
  for (const auto& [id, h] : l.holds) {
    if (h.gpu_memory_mb > 0) {
      if (h.gpus.size() != 1)
        return "shared hold " + id + " holds " + std::to_string(h.gpus.size()) + " GPUs";
      int g = h.gpus[0];
      if (g < 0 || g >= static_cast<int>(l.shared_mb.size()))
        return "GPU index " + std::to_string(g) + " out of range";
      if (!l.gpu_owner[static_cast<size_t>(g)].empty())
        return "GPU " + std::to_string(g) + " both shared and whole";
      if (l.shared_key[static_cast<size_t>(g)] != h.share_key)
        return "GPU " + std::to_string(g) + " shared under two keys";
      shared_sum[g] += h.gpu_memory_mb;
      continue;
    }
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
  for (size_t i = 0; i < l.shared_mb.size(); ++i) {
    auto it = shared_sum.find(static_cast<int>(i));
    int64_t sum = it == shared_sum.end() ? 0 : it->second;
    if (sum != l.shared_mb[i]) return "GPU " + std::to_string(i) + " shared memory mismatch";
    if (l.gpu_memory_mb > 0 && sum > l.gpu_memory_mb)
      return "GPU " + std::to_string(i) + " memory over-allocated";
  }
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
