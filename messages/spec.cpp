#include "messages/spec.hpp"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "bus/subjects.hpp"
#include "messages/names.hpp"

namespace troupe::spec {

namespace {

// How long the JSON of a YAML text may grow: quoting and escaping make it at
// most 8 times longer; only aliases make it longer still, and a few hundred
// bytes of nested aliases name billions of nodes ("billion laughs").
size_t json_limit(std::string_view yaml) {
  return (size_t{1} << 20) + 8 * yaml.size();
}

// `s` as a JSON string literal (quoted, escaped).
void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// YAML node -> JSON text, so that YAML goes through the same protobuf mapping.
// Throws once `out` passes `limit`.
void yaml_to_json(const YAML::Node& n, std::string& out, size_t limit) {
  if (out.size() > limit)
    throw YAML::Exception(YAML::Mark::null_mark(), "aliases expand the document too far");
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out += "null";
      return;
    case YAML::NodeType::Sequence: {
      out += '[';
      bool first = true;
      for (const auto& item : n) {
        if (!first) out += ',';
        first = false;
        yaml_to_json(item, out, limit);
      }
      out += ']';
      return;
    }
    case YAML::NodeType::Map: {
      out += '{';
      bool first = true;
      for (const auto& kv : n) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, kv.first.Scalar());  // keys are escaped like values
        out += ':';
        yaml_to_json(kv.second, out, limit);
      }
      out += '}';
      return;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      // Plain (untagged) scalars that read as numbers or booleans stay bare;
      // quoted ones stay strings.
      bool plain = n.Tag() == "?";
      if (plain && (s == "true" || s == "false")) {
        out += s;
        return;
      }
      if (plain && !s.empty()) {
        char* end = nullptr;
        std::strtod(s.c_str(), &end);
        if (end != nullptr && *end == '\0' && s.find_first_of("xXnN") == std::string::npos) {
          out += s;
          return;
        }
      }
      append_json_string(out, s);
      return;
    }
  }
}

template <class List>
bool contains(const List& list, std::string_view v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

}  // namespace

std::string parse_json(std::string_view json, google::protobuf::Message& m) {
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &m, opts);
  if (st.ok()) return {};
  return "invalid JSON job spec: " + std::string(st.message());
}

std::string to_json(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  return out;
}

Parsed from_json(std::string_view json) {
  Parsed p;
  p.error = parse_json(json, p.spec);
  p.ok = p.error.empty();
  return p;
}

std::string parse_text(std::string_view text, google::protobuf::Message& m) {
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    auto err = parse_json(text, m);
    if (!err.empty()) err.replace(0, std::string("invalid JSON job spec").size(), "invalid JSON");
    return err;
  }
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) return "invalid YAML: the top level must be a mapping";
    std::string json;
    yaml_to_json(root, json, json_limit(text));
    auto err = parse_json(json, m);
    if (!err.empty()) err.replace(0, std::string("invalid JSON job spec").size(), "invalid YAML");
    return err;
  } catch (const YAML::Exception& e) {
    return std::string("invalid YAML: ") + e.what();
  }
}

Parsed from_yaml(std::string_view yaml) {
  Parsed p;
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap()) {
      p.error = "invalid YAML job spec: the top level must be a mapping";
      return p;
    }
    std::string json;
    yaml_to_json(root, json, json_limit(yaml));
    p = from_json(json);
    if (!p.ok) p.error.replace(0, std::string("invalid JSON").size(), "invalid YAML");
  } catch (const YAML::Exception& e) {
    p.error = std::string("invalid YAML job spec: ") + e.what();
  }
  return p;
}

Parsed from_text(std::string_view text) {
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') return from_json(text);
  return from_yaml(text);
}

Parsed from_wire(const wire::JobSpec* s) {
  Parsed p;
  if (s == nullptr) {
    p.error = "submit carries no job spec";
    return p;
  }
  auto& o = p.spec;
  o.set_name(wire::str(s->name()));
  o.set_team(wire::str(s->team()));
  o.set_kind(wire::str(s->kind()));
  if (s->command()) {
    for (auto* c : *s->command()) o.add_command(wire::str(c));
  }
  if (s->env()) {
    for (auto* kv : *s->env()) (*o.mutable_env())[wire::str(kv->key())] = wire::str(kv->value());
  }
  o.set_image(wire::str(s->image()));
  if (auto* r = s->resources()) {
    o.mutable_resources()->set_gpus(r->gpus());
    o.mutable_resources()->set_gpu_type(wire::str(r->gpu_type()));
    o.mutable_resources()->set_cpus(r->cpus());
    o.mutable_resources()->set_memory_mb(r->memory_mb());
  }
  o.set_workers(s->workers());
  o.set_priority(wire::str(s->priority()));
  o.set_max_runtime_s(s->max_runtime_s());
  o.set_max_retries(s->max_retries());
  o.set_idempotency_key(wire::str(s->idempotency_key()));
  o.set_pool(wire::str(s->pool()));
  p.ok = true;
  return p;
}

flatbuffers::Offset<wire::JobSpec> to_wire(flatbuffers::FlatBufferBuilder& fbb,
                                           const pb::JobSpec& s) {
  std::vector<flatbuffers::Offset<flatbuffers::String>> cmd;
  for (const auto& c : s.command()) cmd.push_back(fbb.CreateString(c));
  std::vector<flatbuffers::Offset<wire::KeyValue>> env;
  for (const auto& [k, v] : s.env())
    env.push_back(wire::CreateKeyValue(fbb, fbb.CreateString(k), fbb.CreateString(v)));
  auto res =
      wire::CreateResources(fbb, s.resources().gpus(), fbb.CreateString(s.resources().gpu_type()),
                            s.resources().cpus(), s.resources().memory_mb());
  return wire::CreateJobSpec(
      fbb, fbb.CreateString(s.name()), fbb.CreateString(s.team()), fbb.CreateString(s.kind()),
      fbb.CreateVector(cmd), fbb.CreateVectorOfSortedTables(&env), fbb.CreateString(s.image()), res,
      s.has_workers() ? s.workers() : 1, fbb.CreateString(s.priority()), s.max_runtime_s(),
      s.max_retries(), fbb.CreateString(s.idempotency_key()), fbb.CreateString(s.pool()));
}

void apply_defaults(pb::JobSpec& s) {
  if (!s.has_workers()) s.set_workers(1);
  if (s.priority().empty()) s.set_priority(std::string(names::kDefaultPriority));
  if (s.kind().empty()) s.set_kind("training");
}

std::string validate(const pb::JobSpec& s, const Limits& limits) {
  if (s.team().empty()) return "team is required";
  if (auto err = subjects::check_token(s.team()); !err.empty()) return "team: " + err;
  if (s.team() == names::kSysToken) return "team name 'sys' is reserved";
  if (!contains(names::kKinds, s.kind()))
    return "unknown kind '" + s.kind() + "' (expected training, inference or evaluation)";
  if (s.command().empty()) return "command is required";
  if (s.command_size() > limits.max_command_args) return "command has too many arguments";
  const auto& r = s.resources();
  if (r.gpus() < 0) return "resources.gpus must be >= 0 (got " + std::to_string(r.gpus()) + ")";
  if (r.gpus() > limits.max_gpus_per_worker)
    return "resources.gpus " + std::to_string(r.gpus()) +
           " per worker is more than any node has (max " +
           std::to_string(limits.max_gpus_per_worker) + ")";
  if (r.cpus() < 0) return "resources.cpus must be >= 0";
  if (r.memory_mb() < 0) return "resources.memory_mb must be >= 0";
  if (!r.gpu_type().empty()) {
    if (auto err = subjects::check_token(r.gpu_type()); !err.empty())
      return "resources.gpu_type: " + err;
  }
  int workers = s.has_workers() ? s.workers() : 1;
  if (workers < 1) return "workers must be >= 1 (got " + std::to_string(workers) + ")";
  if (workers > limits.max_workers)
    return "workers must be <= " + std::to_string(limits.max_workers);
  if (workers > 1 && r.gpus() == 0) return "a gang (workers > 1) must request GPUs per worker";
  if (!s.priority().empty() && !contains(limits.priority_classes, s.priority())) {
    std::string known;
    for (const auto& c : limits.priority_classes) known += (known.empty() ? "" : ", ") + c;
    return "unknown priority class '" + s.priority() + "' (known: " + known + ")";
  }
  if (!s.pool().empty()) {
    if (auto err = subjects::check_token(s.pool()); !err.empty()) return "pool: " + err;
  }
  if (s.max_runtime_s() < 0) return "max_runtime_s must be >= 0";
  if (s.max_retries() < 0) return "max_retries must be >= 0";
  if (s.idempotency_key().size() > 256) return "idempotency_key is longer than 256 characters";
  return {};
}

}  // namespace troupe::spec
