// The checkpoint contract on the agent's side (docs/checkpointing.md): a job
// marks a finished checkpoint by atomically renaming a file `latest`, holding
// the checkpoint's path relative to TROUPE_CHECKPOINT_DIR, into that folder.
// The agent polls `latest` of each watched worker and reports every change as
// a Checkpointed message. parse_latest is pure; CheckpointWatch only stats and
// reads the one file.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "node/launch_spec.hpp"

namespace troupe::node {

// What `latest` names, trimmed of surrounding whitespace (a trailing newline
// is usual); nullopt when it cannot name a checkpoint inside the folder: empty,
// absolute, with a ".." component, several lines, a NUL byte, or over 4096 bytes.
std::optional<std::string> parse_latest(const std::string& content);

// The folder as the worker sees it: `dir` when absolute, else <state_dir>/<dir>;
// "" when the launch names none.
std::string resolve_checkpoint_dir(const std::string& state_dir, const std::string& dir);

// Why the agent may not remove `dir` (resolved) as job `job_id`'s checkpoint
// dir for a Forget; "" when it may: `job_id` a subject token, `dir` absolute,
// without a NUL byte, normal (no "." or ".." part, no "//", no trailing "/") and ending in
// "/<job_id>". The agent removes nothing else a message names.
std::string forget_refusal(const std::string& job_id, const std::string& dir);

struct CheckpointSeen {
  std::string path;   // relative to the checkpoint folder
  int64_t ts_ms = 0;  // mtime of `latest` (wall clock, ms since the epoch)
};

// Watches <dir>/latest for one worker. The first look (at launch) is the
// baseline: a `latest` left by an earlier attempt is not news. Every later
// change of the file (a new inode from the rename, a new mtime, or new
// content) that names a valid path is reported once.
class CheckpointWatch {
 public:
  CheckpointWatch() = default;
  explicit CheckpointWatch(std::string dir);
  bool active() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  // Looks at the file now; a new valid checkpoint, else nullopt.
  std::optional<CheckpointSeen> poll();

 private:
  struct Stamp {
    bool exists = false;
    ino_t ino = 0;
    int64_t mtime_ns = 0;
    off_t size = 0;
    bool operator==(const Stamp& o) const {
      return exists == o.exists && ino == o.ino && mtime_ns == o.mtime_ns && size == o.size;
    }
  };
  Stamp stamp() const;

  std::string dir_;
  Stamp last_;
};

}  // namespace troupe::node
