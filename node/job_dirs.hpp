// A node's job folders over time: when an ended job's work and log folders
// go (policy, pure), how much disk a running job's work dir holds, and their
// removal. The agent (node/agent.hpp) keeps the folders' times and runs these
// on its folder guard thread; nothing here takes a lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace troupe::node {

// One job's folders on the node, as the guard sees them.
struct JobFolder {
  bool running = false;       // a worker of the job runs here
  bool disk_limited = false;  // a worker was killed for its work dir's size
  int64_t ended_ms = -1;      // wall time its last worker here ended (-1: not known)
  int64_t mtime_ms = 0;       // the folder's own change time: the age when ended_ms is not known
};

enum class Removal {
  keep,
  work_dir,  // the work dir only (its size ended the job; the log stays)
  all,       // the work dir and the log folder
};

// What goes of a job's folders at `now_ms`: nothing while a worker of it
// runs; everything once it ended `keep_ms` ago (keep_ms <= 0: kept for
// ever); the work dir at once when its size ended the job.
Removal removal_of(const JobFolder& f, int64_t now_ms, int64_t keep_ms);

// The ended jobs' folders to remove first when the disk is full, whatever
// the keep time: the longest ended first (running ones never).
std::vector<std::string> pressure_order(const std::vector<std::pair<std::string, JobFolder>>& f);

// How full the file system `path` is on, in percent of its blocks (what
// non-root users can no longer use counts as used); nullopt when unknown.
std::optional<double> used_percent(const std::string& path);

// A folder's size limits (0: none), and the words a job's end gives when
// its folder passes one: "disk_limit: its <what> passed <limit>, <source>".
struct FolderLimit {
  int64_t max_bytes = 0;
  int64_t max_files = 0;
  std::string what;          // "work dir", "checkpoint dir"
  std::string bytes_source;  // "the node's --job-disk-max-mb"
  std::string files_source;
};

// The reason a job ends when the tree at `dir` holds more than `limit`
// allows (bytes first, then files), measured with du; nullopt when it does
// not or cannot be measured.
std::optional<std::string> over_limit(const std::string& dir, const FolderLimit& limit);

// A quarter of the file system `path` is on: its bytes and its inodes (0
// each when unknown), the default size limit of a job's folder there.
std::pair<int64_t, int64_t> quarter_of_file_system(const std::string& path);

// Bytes of disk the tree at `path` holds (du -s -x -B1: blocks, not
// following symbolic links, one file system); nullopt when du fails.
std::optional<int64_t> disk_usage(const std::string& path);

// Files, folders and links in the tree at `path` (du -s -x --inodes); nullopt
// when du fails.
std::optional<int64_t> file_count(const std::string& path);

// Removes the tree at `path` (rm -rf --one-file-system: never follows a
// symbolic link, safe while its owner renames what is in it). False when
// something is left.
bool remove_tree(const std::string& path);

// The names of the folders in `dir` (not following links), sorted.
std::vector<std::string> folder_names(const std::string& dir);

}  // namespace troupe::node
