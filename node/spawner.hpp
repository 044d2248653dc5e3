// The agent's spawner thread: every worker is forked from this one thread,
// which lives as long as the agent, so that the parent-death signal
// (prctl(PR_SET_PDEATHSIG), set in the child) fires when the agent dies and
// not when some short-lived thread that happened to handle the Launch ends
// (the kernel ties it to the forking thread: NATS delivery threads come and
// go with their subscriptions, and go *before* the agent stops its workers).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "node/process.hpp"

namespace troupe::node {

class Spawner {
 public:
  Spawner();
  ~Spawner();  // stop()
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // Runs spawn_process(spec) on the spawner thread (with die_with_parent set)
  // and returns its result. Thread-safe; after stop() it fails every call.
  SpawnResult spawn(ProcessSpec spec);
  // Joins the thread. The workers it forked get SIGKILL from then on if they
  // still run, so call it only once they are gone (or the agent is going).
  void stop();

 private:
  struct Job {
    ProcessSpec spec;
    SpawnResult result;
    bool done = false;
  };
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace troupe::node
