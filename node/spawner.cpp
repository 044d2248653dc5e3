// Owns the thread workers are forked from (see spawner.hpp for why).
#include "node/spawner.hpp"

namespace troupe::node {

Spawner::Spawner() : thread_([this] { run(); }) {}

Spawner::~Spawner() { stop(); }

SpawnResult Spawner::spawn(ProcessSpec spec) {
  Job job;
  job.spec = std::move(spec);
  job.spec.die_with_parent = true;
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) {
    job.result.error = "the node agent is shutting down";
    return job.result;
  }
  queue_.push_back(&job);
  cv_.notify_all();
  cv_.wait(lock, [&] { return job.done; });
  return std::move(job.result);
}

void Spawner::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Spawner::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) {
      if (stop_) return;
      continue;
    }
    Job* job = queue_.front();
    queue_.pop_front();
    lock.unlock();
    SpawnResult r = spawn_process(job->spec);
    lock.lock();
    job->result = std::move(r);
    job->done = true;
    cv_.notify_all();
  }
}

}  // namespace troupe::node
