#include "actors/shell/bus_ports.hpp"

#include "bus/subjects.hpp"

namespace troupe::shell {

void StreamIntake::append(const std::string& subject, std::vector<uint8_t> bytes,
                          const std::string& msg_id, Done done) {
  if (!gate_.open()) {  // not known to lead right now: nothing may be accepted
    done(false, false, "this scheduler's leader lease is unconfirmed");
    return;
  }
  js_.publish_async(subject, bytes.data(), bytes.size(), msg_id, std::move(done));
}

StreamHistory::~StreamHistory() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StreamHistory::read(const std::string& team, const std::string& job_id, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_ && waiting_.size() < kMaxWaiting) {
      waiting_.push_back(Read{team, job_id, std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  done({}, "too many history reads waiting; retry");
}

void StreamHistory::run() {
  for (;;) {
    Read r;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !waiting_.empty(); });
      if (stop_) return;
      r = std::move(waiting_.front());
      waiting_.pop_front();
    }
    // A read stops short when the newest event it aimed at went meanwhile
    // (--events-max-age): the next read starts from what is stored now.
    bool complete = false;
    std::vector<Inbound> msgs;
    for (int tries = 0; tries < 3 && !complete; ++tries)
      msgs = js_.read_all(subjects::kEventsStream, subjects::job_events(r.team, r.job_id), 2000, 0,
                          &complete);
    std::vector<std::string> events;
    events.reserve(msgs.size());
    for (auto& m : msgs) events.emplace_back(m.data.begin(), m.data.end());
    r.done(std::move(events),
           complete ? std::string() : "the events stream did not answer in full; retry");
  }
}

}  // namespace troupe::shell
