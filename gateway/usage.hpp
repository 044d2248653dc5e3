// The `troupe` CLI's usage edges, pure: an unknown verb or flag named with
// the closest known one, durations and sizes with units, and the job states
// `--state` accepts. Every usage error of the CLI exits 2 (kUsageExit).
// Unit tests: tests/unit/gateway_usage_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "job_spec.pb.h"

namespace troupe::gateway {

inline constexpr int kUsageExit = 2;
// The cluster cannot be reached (sysexits' EX_UNAVAILABLE).
inline constexpr int kUnreachableExit = 69;
// `troupe wait`, `submit --wait`, `logs -f`: how the job ended (job_exit_code).
inline constexpr int kRuntimeLimitExit = 124;  // it hit max_runtime_s (as timeout(1))
inline constexpr int kNoExitCodeExit = 125;    // failed without an exit code (lost, OOM, ...)
inline constexpr int kCanceledExit = 130;      // canceled (as an interrupted shell command)

// The exit code that tells how a terminal job ended: 0 succeeded; its exit
// code (1-255) when a worker exited non-zero (the scheduler records rank 0's,
// else the first non-zero rank's); 124 when its last attempt hit
// max_runtime_s; 125 when it failed without an exit code (lost, OOM, a bad
// launch; `why` gets the reason); 130 when canceled. -1 while not terminal.
int job_exit_code(const pb::JobView& job, std::string* why = nullptr);

// The known word closest to `word` (edit distance at most a third of its
// length, and at least 2), or a known word it is a prefix of; "" when none.
std::string closest(std::string_view word, const std::vector<std::string>& known);

// " (did you mean 'X'?)" when closest() finds one, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& known);

// The first word of `args` (argv without argv[0]) that is neither a flag nor
// the value of one of `global_with_value` (e.g. --nats URL), when it is not
// one of `verbs`: "unknown command 'stauts' (did you mean 'status'?)".
// nullopt when the verb is known or there is none.
std::optional<std::string> unknown_verb(const std::vector<std::string>& args,
                                        const std::vector<std::string>& verbs,
                                        const std::vector<std::string>& global_with_value);

// "90", "90s", "15m", "1h30m", "2d12h": seconds. nullopt when not a
// duration (or beyond 100 years).
std::optional<int64_t> parse_duration_s(std::string_view text);

// "512" (MiB), "512M", "64G", "1T", "64Gi", "64GB", "2048K": MiB, rounded
// up. nullopt when not a size (or beyond 2^40 MiB).
std::optional<int64_t> parse_size_mb(std::string_view text);

// One verb's flags as the usage messages need them: long names ("--gpus")
// and whether each takes a value.
struct VerbFlags {
  std::string verb;
  std::vector<std::string> with_value;
  std::vector<std::string> without_value;  // --json, --follow, ...
};

// The message for a usage error CLI11 raised (`what`) on `words` (argv
// without argv[0]): an unknown flag of the verb named, with the closest;
// `troupe submit` with words after its spec file (a job command without
// --) told to put them after --; else "troupe VERB: what (see --help)".
std::string usage_error(const VerbFlags& verb, const std::vector<std::string>& global_with_value,
                        const std::vector<std::string>& words, const std::string& what);

// `troupe completion bash|zsh`: a completion script for the verbs and each
// verb's flags (`verbs`: each verb with its flags). zsh loads the bash one
// through bashcompinit. "" for another shell.
std::string completion_script(const std::string& shell, const std::vector<VerbFlags>& verbs,
                              const std::vector<std::string>& global_flags,
                              const std::vector<std::string>& global_with_value);

// Whether `path` names a regular file this process can open.
bool readable_file(const std::string& path);

// `-o table|wide|json|yaml` on the listings (status, jobs, nodes, queues,
// why, history): json is --json; yaml the same document as YAML; wide the
// table with more columns (jobs, nodes).
enum class Output { table, wide, json, yaml };
std::optional<Output> parse_output(std::string_view text);

// A JSON document as YAML (block style; strings that would read as another
// type are quoted). "" when `json` is not JSON.
std::string json_to_yaml(const std::string& json);

// "" when `state` is a job state, else the error naming the states.
std::string check_state(std::string_view state);

}  // namespace troupe::gateway
