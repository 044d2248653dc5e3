// Owns reading TROUPE_CHECKPOINT_DIR/latest: validation and change detection.
#include "node/checkpoint.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "bus/subjects.hpp"

namespace troupe::node {

namespace {
constexpr size_t kMaxLatest = 4096;

bool space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
}  // namespace

std::optional<std::string> parse_latest(const std::string& content) {
  if (content.size() > kMaxLatest) return std::nullopt;
  size_t b = 0, e = content.size();
  while (b < e && space(content[b])) ++b;
  while (e > b && space(content[e - 1])) --e;
  std::string p = content.substr(b, e - b);
  if (p.empty() || p.front() == '/') return std::nullopt;
  for (char c : p)
    if (c == '\0' || c == '\n' || c == '\r') return std::nullopt;
  // No ".." component: the path must stay inside the checkpoint folder.
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    std::string part =
        p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part == "..") return std::nullopt;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return p;
}

std::string resolve_checkpoint_dir(const std::string& state_dir, const std::string& dir) {
  if (dir.empty()) return {};
  if (dir.front() == '/') return dir;
  return state_dir + "/" + dir;
}

std::string forget_refusal(const std::string& job_id, const std::string& dir) {
  if (auto why = subjects::check_token(job_id); !why.empty()) return "job_id " + why;
  if (dir.empty() || dir.front() != '/') return "the checkpoint dir is not an absolute path";
  // A C string ends at the first NUL: the rest would name another folder.
  if (dir.find('\0') != std::string::npos) return "the checkpoint dir holds a NUL byte";
  const std::string tail = "/" + job_id;
  if (dir.size() <= tail.size() || dir.compare(dir.size() - tail.size(), tail.size(), tail) != 0)
    return "the checkpoint dir does not end in /" + job_id;
  if (std::filesystem::path(dir).lexically_normal().string() != dir)
    return "the checkpoint dir is not a normal path";
  return {};
}

CheckpointWatch::CheckpointWatch(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) return;
  // Baseline: what an earlier attempt left is not a new checkpoint.
  last_ = stamp();
}

CheckpointWatch::Stamp CheckpointWatch::stamp() const {
  Stamp s;
  struct stat st;
  if (::stat((dir_ + "/latest").c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return s;
  s.exists = true;
  s.ino = st.st_ino;
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  s.size = st.st_size;
  return s;
}

std::optional<CheckpointSeen> CheckpointWatch::poll() {
  if (dir_.empty()) return std::nullopt;
  Stamp now = stamp();
  if (now == last_) return std::nullopt;
  std::string content;
  if (now.exists) {
    if (now.size > static_cast<off_t>(kMaxLatest)) {
      last_ = now;  // too big to name a path: ignored (and not read again until it changes)
      return std::nullopt;
    }
    std::ifstream f(dir_ + "/latest", std::ios::binary);
    content.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    // The stat and the read may straddle a rename; take the stamp again and
    // look next time if it moved.
    Stamp again = stamp();
    if (!(again == now)) return std::nullopt;
  }
  last_ = now;
  if (!now.exists) return std::nullopt;
  auto path = parse_latest(content);
  if (!path) return std::nullopt;
  return CheckpointSeen{*path, now.mtime_ns / 1000000};
}

}  // namespace troupe::node
