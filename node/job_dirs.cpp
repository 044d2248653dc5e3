// Owns the policy and tools for a node's job folders (node/job_dirs.hpp).
#include "node/job_dirs.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "node/process.hpp"

namespace troupe::node {

Removal removal_of(const JobFolder& f, int64_t now_ms, int64_t keep_ms) {
  if (f.running) return Removal::keep;
  const int64_t since = f.ended_ms >= 0 ? f.ended_ms : f.mtime_ms;
  if (keep_ms > 0 && now_ms - since >= keep_ms) return Removal::all;
  return f.disk_limited ? Removal::work_dir : Removal::keep;
}

std::vector<std::string> pressure_order(const std::vector<std::pair<std::string, JobFolder>>& f) {
  std::vector<std::pair<int64_t, std::string>> by_end;
  for (const auto& [id, folder] : f)
    if (!folder.running)
      by_end.emplace_back(folder.ended_ms >= 0 ? folder.ended_ms : folder.mtime_ms, id);
  std::sort(by_end.begin(), by_end.end());
  std::vector<std::string> out;
  for (auto& [t, id] : by_end) out.push_back(std::move(id));
  return out;
}

std::optional<double> used_percent(const std::string& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0 || fs.f_blocks == 0) return std::nullopt;
  return 100.0 * static_cast<double>(fs.f_blocks - fs.f_bavail) / static_cast<double>(fs.f_blocks);
}

namespace {

// du's first number for `path` with `how` (-B1, --inodes).
std::optional<int64_t> du(const std::string& path, const char* how) {
  std::string out;
  // A folder du cannot read (exit 1) still leaves the total of the rest.
  if (run_tool({"du", "-s", "-x", how, "--", path}, &out) < 0) return std::nullopt;
  char* end = nullptr;
  long long n = std::strtoll(out.c_str(), &end, 10);
  if (end == out.c_str() || n < 0) return std::nullopt;
  return n;
}

}  // namespace

std::optional<int64_t> disk_usage(const std::string& path) {
  return du(path, "-B1");
}

std::optional<int64_t> file_count(const std::string& path) {
  return du(path, "--inodes");
}

std::optional<std::string> over_limit(const std::string& dir, const FolderLimit& limit) {
  const std::string head = "disk_limit: its " + limit.what + " passed ";
  if (limit.max_bytes > 0)
    if (auto used = disk_usage(dir); used && *used > limit.max_bytes)
      return head + std::to_string(limit.max_bytes / (1024 * 1024)) + " MiB, " +
             limit.bytes_source + " (it held " + std::to_string(*used) + " bytes)";
  if (limit.max_files > 0)
    if (auto n = file_count(dir); n && *n > limit.max_files)
      return head + std::to_string(limit.max_files) + " files, " + limit.files_source +
             " (it held " + std::to_string(*n) + ")";
  return std::nullopt;
}

std::pair<int64_t, int64_t> quarter_of_file_system(const std::string& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) return {0, 0};
  return {static_cast<int64_t>(fs.f_blocks / 4 * fs.f_frsize),
          static_cast<int64_t>(fs.f_files / 4)};
}

bool remove_tree(const std::string& path) {
  (void)run_tool({"rm", "-rf", "--one-file-system", "--", path});
  std::error_code ec;
  return !std::filesystem::exists(std::filesystem::symlink_status(path, ec));
}

std::vector<std::string> folder_names(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec)) out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace troupe::node
