// The job spec at the edge: JSON / YAML -> pb::JobSpec (protobuf JSON mapping),
// validation (pure), and conversion to and from the wire (FlatBuffers) form.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/message.h>

#include "job_spec.pb.h"
#include "messages/wire.hpp"

namespace troupe::spec {

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

// Bounds a spec must stay within to be possible at all.
struct Limits {
  int max_gpus_per_worker = 64;
  int max_workers = 1024;
  int max_command_args = 4096;
  // Priority class names a spec may use (the cluster config's, else these).
  std::vector<std::string> priority_classes = {"high", "normal", "low"};
};

// Fills in defaults (workers 1, priority normal, gpu_type empty = any).
void apply_defaults(pb::JobSpec& s);
// Returns an empty string when the spec is valid, else what is wrong.
std::string validate(const pb::JobSpec& s, const Limits& limits = {});

// Any protobuf message as JSON with the field names of the .proto.
std::string to_json(const google::protobuf::Message& m);
// Parses JSON into `m`; returns an empty string or the parse error.
std::string parse_json(std::string_view json, google::protobuf::Message& m);
// Parses YAML or JSON text (a file's content) into `m`; "" or the error.
std::string parse_text(std::string_view text, google::protobuf::Message& m);

}  // namespace troupe::spec
