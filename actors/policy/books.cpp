#include "actors/policy/books.hpp"

namespace troupe::policy {

namespace {
void add(Books::Account& a, const Books::Entry& e, int sign) {
  if (e.shared_milli > 0)
    a.used.shared_milli += sign * e.shared_milli * e.workers;
  else
    a.used.gpus += sign * e.gpus * e.workers;
  a.used.cpus += sign * e.cpus * e.workers;
  a.used.memory_mb += sign * e.memory_mb * e.workers;
  if (e.running && e.borrowed && e.shared_milli == 0) a.borrowed_gpus += sign * e.gpus * e.workers;
}
bool empty(const Books::Account& a) {
  return a.used.gpus == 0 && a.used.shared_milli == 0 && a.used.cpus == 0 &&
         a.used.memory_mb == 0 && a.borrowed_gpus == 0;
}
}  // namespace

void Books::apply(const Entry& e, int sign) {
  auto key = std::make_pair(e.team, e.pool);
  auto& a = accounts_[key];
  add(a, e, sign);
  if (empty(a)) accounts_.erase(key);
}

bool Books::grant(const std::string& job_id, const std::string& team, const PlacementRequest& req,
                  bool borrowed, int64_t shared_milli) {
  Entry e;
  e.team = team;
  e.pool = req.pool;
  e.gpus = req.gpus;
  e.cpus = req.cpus;
  e.memory_mb = req.memory_mb;
  e.workers = req.workers;
  e.borrowed = borrowed;
  e.shared_milli = req.shared() ? shared_milli : 0;
  auto [it, fresh] = entries_.emplace(job_id, std::move(e));
  if (fresh) apply(it->second, +1);
  return fresh;
}

bool Books::placed(const std::string& job_id) {
  auto it = entries_.find(job_id);
  if (it == entries_.end() || it->second.running) return false;
  apply(it->second, -1);
  it->second.running = true;
  apply(it->second, +1);
  return true;
}

bool Books::unplaced(const std::string& job_id) {
  auto it = entries_.find(job_id);
  if (it == entries_.end() || it->second.running) return false;
  apply(it->second, -1);
  entries_.erase(it);
  return true;
}

bool Books::ended(const std::string& job_id) {
  auto it = entries_.find(job_id);
  if (it == entries_.end() || !it->second.running) return false;
  apply(it->second, -1);
  entries_.erase(it);
  return true;
}

const Books::Entry* Books::find(const std::string& job_id) const {
  auto it = entries_.find(job_id);
  return it == entries_.end() ? nullptr : &it->second;
}

bool Books::in_flight(const std::string& job_id) const {
  const auto* e = find(job_id);
  return e != nullptr && !e->running;
}

Books::Account Books::account(const std::string& team, const std::string& pool) const {
  auto it = accounts_.find({team, pool});
  return it == accounts_.end() ? Account{} : it->second;
}

Books::Account Books::recount(const std::string& team, const std::string& pool) const {
  Account a;
  for (const auto& [id, e] : entries_)
    if (e.team == team && e.pool == pool) add(a, e, +1);
  return a;
}

}  // namespace troupe::policy
