// `troupe submit` input: splitting argv at "--", KEY=VALUE env pairs, and
// the job spec made from a spec file and/or flags (flags win). Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "job_spec.pb.h"

namespace troupe::gateway {

// argv split at the first literal "--": what CLI11 parses, and the command.
struct SplitArgs {
  std::vector<std::string> options;  // argv[0] first
  std::vector<std::string> command;  // after "--" (empty when there was none)
  bool had_dashdash = false;
};
SplitArgs split_at_dashdash(int argc, const char* const* argv);

// "K=V" -> {K, V}. nullopt when there is no '=' or the key is empty.
std::optional<std::pair<std::string, std::string>> parse_env_pair(const std::string& kv);

// The flags of `troupe submit`; unset ones leave the spec file's value.
struct SubmitFlags {
  std::optional<std::string> team, name, kind, gpu_type, priority, idempotency_key;
  std::optional<int> gpus, workers, max_retries, cpus;
  std::optional<long long> max_runtime_s, memory_mb;
  std::vector<std::string> env;      // K=V
  std::vector<std::string> after;    // JOB[:on] (on: succeeded, failed, finished): depends_on
  std::optional<std::string> array;  // N[%K]: an array of N tasks, K at once (Slurm's form)
  std::vector<std::string> command;  // replaces the spec's command when not empty
};

struct BuiltSpec {
  bool ok = false;
  troupe::pb::JobSpec spec;
  std::string error;
};
// `base` is the spec file's content (may be empty: flags only). The result is
// not validated; run spec::validate on a copy with spec::apply_defaults.
BuiltSpec build_spec(const std::optional<std::string>& file_text, const SubmitFlags& flags);

// validate(apply_defaults(spec)) with a hint on which flag sets what.
std::string check_spec(const troupe::pb::JobSpec& spec);

}  // namespace troupe::gateway
