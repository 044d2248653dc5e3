// Owns serving worker log files to logs requests (JSON in, JSON out).
#include "node/logs.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "bus/subjects.hpp"
#include "messages/json_text.hpp"
#include "messages/log_chunks.hpp"
#include "node/launch_spec.hpp"

namespace troupe::node {

namespace {

using nlohmann::json;

std::string error_reply(const std::string& msg) {
  return json{{"error", msg}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Highest attempt with a log for `rank`, or nullopt.
std::optional<int> latest_attempt(const std::string& state_dir, const std::string& job_id,
                                  int rank) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::optional<int> best;
  const std::string suffix = "-rank-" + std::to_string(rank) + ".log";
  for (fs::directory_iterator it(log_dir(state_dir, job_id), ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("attempt-", 0) != 0 || name.size() <= 8 + suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string num = name.substr(8, name.size() - 8 - suffix.size());
    if (num.empty() || num.size() > 9 || num.find_first_not_of("0123456789") != std::string::npos)
      continue;
    int a = std::stoi(num);
    if (!best || a > *best) best = a;
  }
  return best;
}

}  // namespace

std::string handle_logs_request(const std::string& state_dir, const std::string& body) {
  json req = json_text::parse<json>(body);
  if (req.is_discarded() || !req.is_object())
    return error_reply("logs request must be a JSON object");
  auto jid = req.find("job_id");
  if (jid == req.end() || !jid->is_string()) return error_reply("job_id is required");
  std::string job_id = jid->get<std::string>();
  if (auto why = subjects::check_token(job_id); !why.empty())
    return error_reply("no log for job " + job_id + ": job_id " + why);

  logchunks::PageRequest page;
  if (auto err = logchunks::read_page_request(req, &page); !err.empty()) return error_reply(err);
  const int r = page.rank;
  const long long max = page.max_bytes;

  std::optional<int> a;
  if (page.attempt >= 0)
    a = page.attempt;
  else
    a = latest_attempt(state_dir, job_id, r);
  const std::string where = "no log for job " + job_id + " rank " + std::to_string(r) +
                            (a ? " attempt " + std::to_string(*a) : std::string()) +
                            " on this node";
  if (!a) return error_reply(where);
  std::string path = log_path(state_dir, WorkerKey{job_id, *a, r});
  std::ifstream f(path, std::ios::binary);
  if (!f) return error_reply(where);
  f.seekg(0, std::ios::end);
  long long size = static_cast<long long>(f.tellg());
  if (size < 0) return error_reply("cannot read the log of job " + job_id);
  long long off = std::min<long long>(page.offset, size);
  long long want = std::min(max, size - off);
  std::string data(static_cast<size_t>(want), '\0');
  f.seekg(off);
  f.read(data.data(), want);
  data.resize(static_cast<size_t>(f.gcount()));
  return logchunks::reply_json(std::move(data), off, size, false);
}

}  // namespace troupe::node
