// Owns serving worker log files to logs requests (JSON in, JSON out).
#include "node/logs.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "bus/subjects.hpp"
#include "messages/log_chunks.hpp"
#include "node/launch_spec.hpp"

namespace troupe::node {

namespace {

using nlohmann::json;

std::string error_reply(const std::string& msg) {
  return json{{"error", msg}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Reads an optional integer field; false when present but not an integer.
bool int_field(const json& req, const char* name, std::optional<long long>* out) {
  auto it = req.find(name);
  if (it == req.end() || it->is_null()) return true;
  if (!it->is_number_integer()) return false;
  *out = it->get<long long>();
  return true;
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
  json req = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded() || !req.is_object())
    return error_reply("logs request must be a JSON object");
  auto jid = req.find("job_id");
  if (jid == req.end() || !jid->is_string()) return error_reply("job_id is required");
  std::string job_id = jid->get<std::string>();
  if (auto why = subjects::check_token(job_id); !why.empty())
    return error_reply("no log for job " + job_id + ": job_id " + why);

  std::optional<long long> attempt, rank, offset, max_bytes;
  if (!int_field(req, "attempt", &attempt) || !int_field(req, "rank", &rank) ||
      !int_field(req, "offset", &offset) || !int_field(req, "max_bytes", &max_bytes))
    return error_reply("attempt, rank, offset and max_bytes must be integers");
  long long r = rank.value_or(0);
  if (r < 0 || r > (1LL << 30)) return error_reply("rank must be >= 0");
  if (offset.value_or(0) < 0) return error_reply("offset must be >= 0");
  long long max = max_bytes.value_or(kDefaultLogBytes);
  if (max <= 0) max = kDefaultLogBytes;
  if (max > kMaxLogBytes) max = kMaxLogBytes;

  std::optional<int> a;
  if (attempt && *attempt >= 0 && *attempt <= (1LL << 30))
    a = static_cast<int>(*attempt);
  else
    a = latest_attempt(state_dir, job_id, static_cast<int>(r));
  const std::string where = "no log for job " + job_id + " rank " + std::to_string(r) +
                            (a ? " attempt " + std::to_string(*a) : std::string()) +
                            " on this node";
  if (!a) return error_reply(where);
  std::string path = log_path(state_dir, WorkerKey{job_id, *a, static_cast<int>(r)});
  std::ifstream f(path, std::ios::binary);
  if (!f) return error_reply(where);
  f.seekg(0, std::ios::end);
  long long size = static_cast<long long>(f.tellg());
  if (size < 0) return error_reply("cannot read the log of job " + job_id);
  long long off = std::min(offset.value_or(0), size);
  long long want = std::min(max, size - off);
  std::string data(static_cast<size_t>(want), '\0');
  f.seekg(off);
  f.read(data.data(), want);
  data.resize(static_cast<size_t>(f.gcount()));
  return logchunks::reply_json(std::move(data), off, size, false);
}

}  // namespace troupe::node
