// The job spec at the edge: JSON / YAML -> pb::JobSpec (protobuf JSON mapping),
// validation (pure), and conversion to and from the wire (FlatBuffers) form.
#pragma once

#include <google/protobuf/message.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "job_spec.pb.h"
#include "messages/wire.hpp"

namespace troupe::spec {

// resources.gpu_memory_mb above this is no GPU's memory (1 TiB).
inline constexpr int64_t kMaxGpuMemoryMb = 1024 * 1024;

struct Parsed {
  bool ok = false;
  pb::JobSpec spec;
  std::string error;  // what is wrong, as a user reads it
};

Parsed from_json(std::string_view json);
Parsed from_yaml(std::string_view yaml);
// A file's content: YAML unless it starts with '{' (JSON is also YAML, but the
// JSON parser gives better errors).
Parsed from_text(std::string_view text);
Parsed from_wire(const wire::JobSpec* s);

flatbuffers::Offset<wire::JobSpec> to_wire(flatbuffers::FlatBufferBuilder& fbb,
                                           const pb::JobSpec& s);

// Bounds a spec must stay within to be possible at all, and to stay small
// enough for the bus: a job's Launch (command + env) and its record (the whole
// spec) travel as NATS messages, whose max_payload is 1 MiB. The defaults are
// documented in docs/admission.md; every refusal names the limit and the value.
struct Limits {
  int max_gpus_per_worker = 64;
  int max_workers = 1024;
  int64_t max_gpus_per_job = 32768;  // workers x resources.gpus
  int max_command_args = 4096;
  int64_t max_command_bytes = 128 * 1024;  // all arguments together
  int max_env_entries = 256;
  int64_t max_env_bytes = 64 * 1024;  // keys and values together
  int max_name_bytes = 128;
  int max_image_bytes = 1024;
  int max_idempotency_key_bytes = 256;
  int max_retries = 100;
  int64_t max_runtime_s = 30LL * 24 * 3600;  // 30 days
  int max_grace_s = 3600;                    // a longer grace would make a job unpreemptible
  int64_t max_launch_bytes = 256 * 1024;     // launch_bytes_estimate()
  int max_gpu_types = 16;                    // resources.gpu_types entries
  int max_dependencies = 64;                 // depends_on entries
  int max_labels = 32;                       // labels entries
  int max_label_value_bytes = 256;
  int max_pipeline_jobs = 256;  // jobs of one pipeline
  int max_array_tasks = 10000;  // tasks of one array or sweep (its grid's points)
  int max_sweep_params = 16;    // sweep.params entries
  int max_sweep_values = 1000;  // values of one sweep parameter
  int max_param_value_bytes = 256;
  // Priority class names a spec may use (the cluster config's, else these).
  std::vector<std::string> priority_classes = {"high", "normal", "low"};
};

// What a `depends_on` entry waits for: its upstream job ended succeeded (the
// default), failed, or in any end (finished).
inline constexpr std::string_view kOnSucceeded = "succeeded";
inline constexpr std::string_view kOnFailed = "failed";
inline constexpr std::string_view kOnFinished = "finished";
inline constexpr std::array<std::string_view, 3> kDependencyOns = {kOnSucceeded, kOnFailed,
                                                                   kOnFinished};

// resources.locality: only the named cluster/region (the default), or there
// first (docs/clusters.md).
inline constexpr std::string_view kLocalityHard = "hard";
inline constexpr std::string_view kLocalitySoft = "soft";
// Whether the spec is an array or a sweep (a job of many tasks).
bool is_array(const pb::JobSpec& s);
// Its task count: array.count, or the points of the sweep's grid (0: not one).
int64_t array_tasks(const pb::JobSpec& s);
// Its parallelism (0: every task at once).
int array_parallelism(const pb::JobSpec& s);

// Fills in defaults (workers 1, priority normal, gpu_type empty = any, a
// dependency's `on` succeeded).
void apply_defaults(pb::JobSpec& s);

// What validation found: nothing, a spec that cannot be right (invalid), or
// one that is too large to carry (too_large: the sizes of Limits).
struct Verdict {
  enum class Kind { ok, invalid, too_large };
  Kind kind = Kind::ok;
  std::string error;  // what is wrong, naming the limit and the value
  bool ok() const { return kind == Kind::ok; }
};
Verdict check(const pb::JobSpec& s, const Limits& limits = {});
// Returns an empty string when the spec is valid, else what is wrong (check().error).
std::string validate(const pb::JobSpec& s, const Limits& limits = {});

// An upper estimate of the encoded size of the job's largest bus messages (its
// Launch: command, env and fixed fields; its record: the whole spec), in bytes.
int64_t launch_bytes_estimate(const pb::JobSpec& s);

// A stable fingerprint of a spec (deterministic serialization, hashed): two
// submissions with the same idempotency key must carry equal fingerprints.
std::string fingerprint(const pb::JobSpec& s);
// The same hash of any bytes (a request's body, say).
std::string digest(std::string_view bytes);

// Any protobuf message as JSON with the field names of the .proto, every
// field printed (zeros too): the events' fixed shape (event_json.hpp).
std::string to_json(const google::protobuf::Message& m);
// The same for the job views of the user API (JobView, JobList): a zero,
// false or empty field is left out (docs/api.md), but for `optional` fields
// that are set (`exit_code: 0`). NodeViews keep every field: `alive` and
// `schedulable` read false when absent, which older readers took for true.
std::string view_json(const google::protobuf::Message& m);
// Parses JSON into `m`; returns an empty string or the parse error.
std::string parse_json(std::string_view json, google::protobuf::Message& m);
// Parses YAML or JSON text (a file's content) into `m`; "" or the error.
std::string parse_text(std::string_view text, google::protobuf::Message& m);

}  // namespace troupe::spec
