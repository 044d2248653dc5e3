#include "messages/spec.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "messages/names.hpp"

namespace troupe::spec {

namespace {

// How deep a spec's YAML may nest. A job spec is a few levels deep; protobuf's
// JSON parser stops at 100.
constexpr int kMaxYamlDepth = 64;

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

// A YAML value of the wrong shape for its field (a string where the schema
// has a list), told as a user reads it.
struct ShapeError {
  std::string message;
};

// What the schema says a YAML node is: a message (its fields by name), or a
// field's value (its element when repeated); none: no schema (free form).
struct Schema {
  const google::protobuf::Descriptor* message = nullptr;
  const google::protobuf::FieldDescriptor* field = nullptr;
};

const google::protobuf::FieldDescriptor* field_named(const google::protobuf::Descriptor* d,
                                                     const std::string& key) {
  if (d == nullptr) return nullptr;
  if (const auto* f = d->FindFieldByName(key)) return f;
  return d->FindFieldByCamelcaseName(key);  // lowerCamelCase, as protobuf's JSON accepts
}

// The schema of a field's element (a list's item, or the field itself).
Schema element_of(const google::protobuf::FieldDescriptor* f) {
  if (f == nullptr) return {};
  if (f->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) return {f->message_type(), f};
  return {nullptr, f};
}

// YAML node -> JSON text, so that YAML goes through the same protobuf mapping.
// Converted by the schema: a scalar where the schema has a string stays a
// string, whatever it looks like (`--epochs, 3`, `.001`, `010`, `yes`);
// elsewhere plain scalars that read as numbers or booleans stay bare. A
// scalar where the schema has a list is refused (ShapeError), never read as
// a list of one. Throws once `out` passes `limit`, or past kMaxYamlDepth
// levels: an alias inside its own anchor (`&a [*a]`) is a node that holds
// itself, and a deep one would end the process on its stack.
void yaml_to_json(const YAML::Node& n, std::string& out, size_t limit, Schema schema,
                  bool element = false, int depth = 0) {
  if (out.size() > limit)
    throw YAML::Exception(YAML::Mark::null_mark(), "aliases expand the document too far");
  if (depth > kMaxYamlDepth)
    throw YAML::Exception(n.Mark(), "nested more than " + std::to_string(kMaxYamlDepth) +
                                        " levels deep (or an alias inside its own anchor)");
  const auto* f = schema.field;
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
        yaml_to_json(item, out, limit, element_of(f), true, depth + 1);
      }
      out += ']';
      return;
    }
    case YAML::NodeType::Map: {
      out += '{';
      bool first = true;
      // A map field (env): its values are the entry's `value`.
      const google::protobuf::FieldDescriptor* map_value =
          f != nullptr && f->is_map() ? f->message_type()->FindFieldByName("value") : nullptr;
      for (const auto& kv : n) {
        if (!first) out += ',';
        first = false;
        const std::string& key = kv.first.Scalar();
        append_json_string(out, key);  // keys are escaped like values
        out += ':';
        Schema sub;
        if (map_value != nullptr) {
          sub = element_of(map_value);
        } else if (const auto* field = field_named(schema.message, key)) {
          sub = field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE &&
                        !field->is_repeated()
                    ? Schema{field->message_type(), field}
                    : Schema{nullptr, field};
        }
        yaml_to_json(kv.second, out, limit, sub, false, depth + 1);
      }
      out += '}';
      return;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (f != nullptr && f->is_repeated() && !element && !f->is_map()) {
        throw ShapeError{f->name() + " is a list: write it as [a, b, ...], not a string (" +
                         (f->name() == "command"
                              ? "a string is never split into a command and its arguments; "
                                "on the command line, give the command after --"
                              : "got '" + s + "'") +
                         ")"};
      }
      if (f != nullptr && f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
        append_json_string(out, s);
        return;
      }
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

namespace {

// Whether a repeated field of `m` (or of a message in it) holds exactly one
// element: the only way protobuf's JSON parser shows a value it read as a
// list of one though it was written as a single value.
bool has_single_repeated(const google::protobuf::Message& m) {
  const auto* r = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const auto* f : fields) {
    if (f->is_map()) continue;
    bool message = f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE;
    if (f->is_repeated()) {
      int n = r->FieldSize(m, f);
      if (n == 1 && !message) return true;
      if (message)
        for (int i = 0; i < n; ++i)
          if (n == 1 || has_single_repeated(r->GetRepeatedMessage(m, f, i))) return true;
    } else if (message && has_single_repeated(r->GetMessage(m, f))) {
      return true;
    }
  }
  return false;
}

// The first field of `d` written as a single value in `v` where a list is
// due ("" when none), as a path: "command", "jobs[0].command".
std::string scalar_for_list(const google::protobuf::Value& v, const google::protobuf::Descriptor* d,
                            const std::string& path) {
  if (v.kind_case() != google::protobuf::Value::kStructValue) return {};
  for (const auto& [key, val] : v.struct_value().fields()) {
    const auto* f = d->FindFieldByName(key);
    for (int i = 0; f == nullptr && i < d->field_count(); ++i)
      if (d->field(i)->json_name() == key) f = d->field(i);
    if (f == nullptr || f->is_map()) continue;
    std::string at = path.empty() ? f->name() : path + "." + f->name();
    bool message = f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE;
    if (f->is_repeated()) {
      if (val.kind_case() == google::protobuf::Value::kNullValue) continue;
      if (val.kind_case() != google::protobuf::Value::kListValue) return at;
      if (!message) continue;
      for (int i = 0; i < val.list_value().values_size(); ++i)
        if (auto e = scalar_for_list(val.list_value().values(i), f->message_type(),
                                     at + "[" + std::to_string(i) + "]");
            !e.empty())
          return e;
    } else if (message) {
      if (auto e = scalar_for_list(val, f->message_type(), at); !e.empty()) return e;
    }
  }
  return {};
}

}  // namespace

std::string parse_json(std::string_view json, google::protobuf::Message& m) {
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &m, opts);
  if (!st.ok()) return "invalid JSON job spec: " + std::string(st.message());
  // protobuf's JSON reads a single value where a list is due as a list of
  // one: `"command": "echo hello world"` would run a program of that name.
  // Refused, for any message (a spec, a pipeline's jobs, a config); looked at
  // again only when some list holds one element (rare; never a hot path).
  if (!has_single_repeated(m)) return {};
  google::protobuf::Value doc;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(
           google::protobuf::StringPiece(json.data(), json.size()), &doc, o)
           .ok())
    return {};
  auto at = scalar_for_list(doc, m.GetDescriptor(), "");
  if (at.empty()) return {};
  bool command =
      at == "command" || (at.size() > 8 && at.compare(at.size() - 8, 8, ".command") == 0);
  return "invalid JSON job spec: " + at + " is a list: write it as [\"a\", \"b\", ...], not a " +
         (command ? "string (a string is never split into a command and its arguments)"
                  : "single value");
}

namespace {
// A string field left out of the buffer when empty.
flatbuffers::Offset<flatbuffers::String> optional_string(flatbuffers::FlatBufferBuilder& fbb,
                                                         const std::string& s) {
  return s.empty() ? flatbuffers::Offset<flatbuffers::String>() : fbb.CreateString(s);
}

std::string print_json(const google::protobuf::Message& m, bool zeros) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = zeros;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  return out;
}
}  // namespace

std::string to_json(const google::protobuf::Message& m) {
  return print_json(m, true);
}

std::string view_json(const google::protobuf::Message& m) {
  return print_json(m, false);
}

Parsed from_json(std::string_view json) {
  Parsed p;
  p.error = parse_json(json, p.spec);  // (a single value for a list is refused there)
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
    yaml_to_json(root, json, json_limit(text), Schema{m.GetDescriptor(), nullptr});
    auto err = parse_json(json, m);
    if (!err.empty()) err.replace(0, std::string("invalid JSON job spec").size(), "invalid YAML");
    return err;
  } catch (const YAML::Exception& e) {
    return std::string("invalid YAML: ") + e.what();
  } catch (const ShapeError& e) {
    return "invalid YAML: " + e.message;
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
    yaml_to_json(root, json, json_limit(yaml), Schema{pb::JobSpec::descriptor(), nullptr});
    p = from_json(json);
    if (!p.ok) p.error.replace(0, std::string("invalid JSON").size(), "invalid YAML");
  } catch (const YAML::Exception& e) {
    p.error = std::string("invalid YAML job spec: ") + e.what();
  } catch (const ShapeError& e) {
    p.error = "invalid YAML job spec: " + e.message;
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
    o.mutable_resources()->set_gpu_memory_mb(r->gpu_memory_mb());
    o.mutable_resources()->set_cluster(wire::str(r->cluster()));
    o.mutable_resources()->set_region(wire::str(r->region()));
    o.mutable_resources()->set_locality(wire::str(r->locality()));
    if (r->gpu_types())
      for (auto* t : *r->gpu_types()) o.mutable_resources()->add_gpu_types(wire::str(t));
  }
  o.set_workers(s->workers());
  o.set_priority(wire::str(s->priority()));
  o.set_max_runtime_s(s->max_runtime_s());
  o.set_max_retries(s->max_retries());
  o.set_idempotency_key(wire::str(s->idempotency_key()));
  o.set_pool(wire::str(s->pool()));
  if (s->depends_on())
    for (auto* d : *s->depends_on()) {
      auto* dep = o.add_depends_on();
      dep->set_job(wire::str(d->job()));
      dep->set_on(wire::str(d->on()));
    }
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
  std::vector<flatbuffers::Offset<flatbuffers::String>> types;
  for (const auto& t : s.resources().gpu_types()) types.push_back(fbb.CreateString(t));
  auto res = wire::CreateResources(
      fbb, s.resources().gpus(), fbb.CreateString(s.resources().gpu_type()), s.resources().cpus(),
      s.resources().memory_mb(), types.empty() ? 0 : fbb.CreateVector(types),
      s.resources().gpu_memory_mb(), optional_string(fbb, s.resources().cluster()),
      optional_string(fbb, s.resources().region()), optional_string(fbb, s.resources().locality()));
  std::vector<flatbuffers::Offset<wire::Dependency>> deps;
  for (const auto& d : s.depends_on())
    deps.push_back(
        wire::CreateDependency(fbb, fbb.CreateString(d.job()), fbb.CreateString(d.on())));
  return wire::CreateJobSpec(
      fbb, fbb.CreateString(s.name()), fbb.CreateString(s.team()), fbb.CreateString(s.kind()),
      fbb.CreateVector(cmd), fbb.CreateVectorOfSortedTables(&env), fbb.CreateString(s.image()), res,
      s.has_workers() ? s.workers() : 1, fbb.CreateString(s.priority()), s.max_runtime_s(),
      s.max_retries(), fbb.CreateString(s.idempotency_key()), fbb.CreateString(s.pool()),
      deps.empty() ? 0 : fbb.CreateVector(deps));
}

void apply_defaults(pb::JobSpec& s) {
  if (!s.has_workers()) s.set_workers(1);
  if (s.priority().empty()) s.set_priority(std::string(names::kDefaultPriority));
  if (s.kind().empty()) s.set_kind("training");
  for (auto& d : *s.mutable_depends_on())
    if (d.on().empty()) d.set_on(std::string(kOnSucceeded));
}

namespace {

std::string num(int64_t v) {
  return std::to_string(v);
}

// The first control character (< 0x20 or 0x7f) in `s`, as "0x0a"; "" when none.
std::string control_char(std::string_view s) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", u);
      return buf;
    }
  }
  return {};
}

bool env_key_ok(std::string_view k) {
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (k.empty() || !alpha(k[0])) return false;
  for (char c : k)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

// `s` shortened for an error message (hostile values can be long).
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  if (s.size() > 40) out += "...";
  return out;
}

Verdict invalid(std::string e) {
  return {Verdict::Kind::invalid, std::move(e)};
}
Verdict too_large(std::string e) {
  return {Verdict::Kind::too_large, std::move(e)};
}

// The sizes: checked first, before anything walks a hostile spec twice.
Verdict check_sizes(const pb::JobSpec& s, const Limits& limits) {
  if (static_cast<int64_t>(s.name().size()) > limits.max_name_bytes)
    return too_large("name is " + num(s.name().size()) + " bytes (limit max_name_bytes " +
                     num(limits.max_name_bytes) + ")");
  if (static_cast<int64_t>(s.image().size()) > limits.max_image_bytes)
    return too_large("image is " + num(s.image().size()) + " bytes (limit max_image_bytes " +
                     num(limits.max_image_bytes) + ")");
  if (static_cast<int64_t>(s.idempotency_key().size()) > limits.max_idempotency_key_bytes)
    return too_large("idempotency_key is " + num(s.idempotency_key().size()) +
                     " bytes, longer than " + num(limits.max_idempotency_key_bytes) +
                     " characters (limit max_idempotency_key_bytes)");
  if (s.command_size() > limits.max_command_args)
    return too_large("command has too many arguments: " + num(s.command_size()) +
                     " (limit max_command_args " + num(limits.max_command_args) + ")");
  int64_t cmd_bytes = 0;
  for (const auto& a : s.command()) cmd_bytes += static_cast<int64_t>(a.size());
  if (cmd_bytes > limits.max_command_bytes)
    return too_large("command is " + num(cmd_bytes) + " bytes (limit max_command_bytes " +
                     num(limits.max_command_bytes) + ")");
  if (static_cast<int64_t>(s.env_size()) > limits.max_env_entries)
    return too_large("env has " + num(s.env_size()) + " entries (limit max_env_entries " +
                     num(limits.max_env_entries) + ")");
  int64_t env_bytes = 0;
  for (const auto& [k, v] : s.env()) env_bytes += static_cast<int64_t>(k.size() + v.size());
  if (env_bytes > limits.max_env_bytes)
    return too_large("env is " + num(env_bytes) + " bytes, keys and values (limit max_env_bytes " +
                     num(limits.max_env_bytes) + ")");
  if (s.labels_size() > limits.max_labels)
    return too_large("labels has " + num(s.labels_size()) + " entries (limit max_labels " +
                     num(limits.max_labels) + ")");
  for (const auto& [k, v] : s.labels()) {
    if (k.empty() || k.size() > 63 || !std::all_of(k.begin(), k.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
                 c == '/';
        }))
      return too_large("label key '" + shown(k) +
                       "' must be 1-63 characters of letters, digits, '.', '_', '-', '/'");
    if (static_cast<int64_t>(v.size()) > limits.max_label_value_bytes)
      return too_large("label " + k + " is " + num(v.size()) +
                       " bytes (limit max_label_value_bytes " + num(limits.max_label_value_bytes) +
                       ")");
  }
  if (s.depends_on_size() > limits.max_dependencies)
    return too_large("depends_on lists " + num(s.depends_on_size()) +
                     " jobs (limit max_dependencies " + num(limits.max_dependencies) + ")");
  if (s.sweep().params_size() > limits.max_sweep_params)
    return too_large("sweep.params has " + num(s.sweep().params_size()) +
                     " parameters (limit max_sweep_params " + num(limits.max_sweep_params) + ")");
  for (const auto& [k, list] : s.sweep().params()) {
    if (list.values_size() > limits.max_sweep_values)
      return too_large("sweep.params." + shown(k) + " has " + num(list.values_size()) +
                       " values (limit max_sweep_values " + num(limits.max_sweep_values) + ")");
    for (const auto& v : list.values())
      if (v.kind_case() == google::protobuf::Value::kStringValue &&
          static_cast<int64_t>(v.string_value().size()) > limits.max_param_value_bytes)
        return too_large("a value of sweep.params." + shown(k) + " is " +
                         num(v.string_value().size()) + " bytes (limit max_param_value_bytes " +
                         num(limits.max_param_value_bytes) + ")");
  }
  if (s.array().count() > limits.max_array_tasks)
    return too_large("array.count " + num(s.array().count()) + " is more than " +
                     num(limits.max_array_tasks) + " (limit max_array_tasks)");
  if (auto est = launch_bytes_estimate(s); est > limits.max_launch_bytes)
    return too_large("the job's launch message would be about " + num(est) +
                     " bytes (limit max_launch_bytes " + num(limits.max_launch_bytes) + ")");
  return {};
}

}  // namespace

int64_t launch_bytes_estimate(const pb::JobSpec& s) {
  // FlatBuffers: a string costs its bytes, a 4-byte length, a NUL and up to 3
  // bytes of padding, plus its 4-byte offset in a vector; a KeyValue table
  // adds its vtable and offsets. The fixed part covers the ids, the GPU list
  // (64 ints at most) and the other scalar fields with room to spare.
  constexpr int64_t kFixed = 4096, kPerString = 12, kPerEntry = 40;
  int64_t n = kFixed;
  for (const auto& a : s.command()) n += static_cast<int64_t>(a.size()) + kPerString;
  for (const auto& [k, v] : s.env()) n += static_cast<int64_t>(k.size() + v.size()) + kPerEntry;
  for (const std::string* f :
       {&s.name(), &s.team(), &s.kind(), &s.image(), &s.priority(), &s.idempotency_key(), &s.pool(),
        &s.checkpoint_signal(), &s.resources().gpu_type()})
    n += static_cast<int64_t>(f->size()) + kPerString;
  for (const auto& t : s.resources().gpu_types()) n += static_cast<int64_t>(t.size()) + kPerString;
  return n;
}

std::string fingerprint(const pb::JobSpec& s) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream sos(&bytes);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);  // map entries in key order
    s.SerializeToCodedStream(&cos);
  }
  // Keys are scoped to a team, so a collision could only mistake one of a
  // team's own specs for another of its own.
  return digest(bytes);
}

std::string digest(std::string_view bytes) {
  // FNV-1a, 64 bits, and the length: the same on every host and version.
  uint64_t h = 14695981039346656037ULL;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx-%zx", static_cast<unsigned long long>(h), bytes.size());
  return buf;
}

bool is_array(const pb::JobSpec& s) {
  return s.has_array() || s.has_sweep();
}

int64_t array_tasks(const pb::JobSpec& s) {
  if (s.has_array()) return s.array().count();
  if (!s.has_sweep() || s.sweep().params().empty()) return 0;
  int64_t n = 1;
  for (const auto& [k, list] : s.sweep().params()) {
    n *= list.values_size();
    if (n > (int64_t{1} << 40)) return n;  // far past any limit: no overflow
  }
  return n;
}

int array_parallelism(const pb::JobSpec& s) {
  return s.has_array() ? s.array().parallelism() : s.sweep().parallelism();
}

namespace {

// An array's or sweep's shape: counts, parallelism, parameter names and values.
Verdict check_array(const pb::JobSpec& s, const Limits& limits) {
  if (!is_array(s)) return {};
  if (s.has_array() && s.has_sweep())
    return invalid("array and sweep exclude each other: a sweep is an array over a grid");
  const char* what = s.has_array() ? "array" : "sweep";
  if (s.has_array() && s.array().count() < 1)
    return invalid("array.count must be >= 1 (got " + num(s.array().count()) + ")");
  if (s.has_sweep()) {
    if (s.sweep().params().empty())
      return invalid("sweep.params is required: each parameter with a list of values");
    for (const auto& [k, list] : s.sweep().params()) {
      if (k.empty() || k.size() > 64 || !std::all_of(k.begin(), k.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
          }))
        return invalid("sweep parameter name '" + shown(k) +
                       "' must be 1-64 characters of letters, digits, '_', '-', '.'");
      if (list.values().empty())
        return invalid("sweep.params." + k + " has no values (give a list of one at least)");
      for (const auto& v : list.values()) {
        using K = google::protobuf::Value;
        auto kind = v.kind_case();
        if (kind != K::kNumberValue && kind != K::kStringValue && kind != K::kBoolValue)
          return invalid("sweep.params." + k +
                         ": each value must be a number, a string or a boolean");
        if (kind == K::kNumberValue && !std::isfinite(v.number_value()))
          return invalid("sweep.params." + k + ": a number must be finite");
        if (kind == K::kStringValue) {
          if (auto c = control_char(v.string_value()); !c.empty())
            return invalid("sweep.params." + k + ": a value contains the control character " + c);
        }
      }
    }
    if (int64_t n = array_tasks(s); n > limits.max_array_tasks)
      return too_large("the sweep's grid has " + num(n) + " points (limit max_array_tasks " +
                       num(limits.max_array_tasks) + ")");
  }
  int k = array_parallelism(s);
  if (k < 0) return invalid(std::string(what) + ".parallelism must be >= 0 (got " + num(k) + ")");
  return {};
}

}  // namespace

Verdict check(const pb::JobSpec& s, const Limits& limits) {
  if (auto v = check_sizes(s, limits); !v.ok()) return v;
  if (s.team().empty()) return invalid("team is required");
  if (auto err = names::check_token(s.team()); !err.empty()) return invalid("team: " + err);
  if (s.team() == names::kSysToken) return invalid("team name 'sys' is reserved");
  if (auto c = control_char(s.name()); !c.empty())
    return invalid("name contains the control character " + c);
  if (!contains(names::kKinds, s.kind()))
    return invalid("unknown kind '" + shown(s.kind()) +
                   "' (expected training, inference or evaluation)");
  if (s.command().empty()) return invalid("command is required");
  for (int i = 0; i < s.command_size(); ++i)
    if (s.command(i).find('\0') != std::string::npos)
      return invalid("command argument " + num(i) + " contains a NUL byte");
  for (const auto& [k, v] : s.env()) {
    if (!env_key_ok(k))
      return invalid("env key '" + shown(k) + "' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
    if (v.find('\0') != std::string::npos)
      return invalid("env value of " + k + " contains a NUL byte");
  }
  if (auto c = control_char(s.image()); !c.empty())
    return invalid("image contains the control character " + c);
  if (auto c = control_char(s.idempotency_key()); !c.empty())
    return invalid("idempotency_key contains the control character " + c);
  const auto& r = s.resources();
  if (r.gpus() < 0) return invalid("resources.gpus must be >= 0 (got " + num(r.gpus()) + ")");
  if (r.gpus() > limits.max_gpus_per_worker)
    return invalid("resources.gpus " + num(r.gpus()) +
                   " per worker is more than any node has (max " + num(limits.max_gpus_per_worker) +
                   ")");
  if (r.cpus() < 0) return invalid("resources.cpus must be >= 0 (got " + num(r.cpus()) + ")");
  if (r.memory_mb() < 0)
    return invalid("resources.memory_mb must be >= 0 (got " + num(r.memory_mb()) + ")");
  if (!r.gpu_type().empty()) {
    if (auto err = names::check_token(r.gpu_type()); !err.empty())
      return invalid("resources.gpu_type: " + err);
  }
  if (r.gpu_types_size() > limits.max_gpu_types)
    return invalid("resources.gpu_types lists " + num(r.gpu_types_size()) + " types; at most " +
                   num(limits.max_gpu_types));
  for (const auto& t : r.gpu_types())
    if (auto err = names::check_token(t); !err.empty())
      return invalid("resources.gpu_types: " + err);
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string&>{"resources.cluster", r.cluster()},
        {"resources.region", r.region()}})
    if (!value.empty())
      if (auto err = names::check_token(value); !err.empty())
        return invalid(std::string(field) + ": " + err);
  if (!s.dispatch().empty())
    if (auto err = names::check_token(s.dispatch()); !err.empty())
      return invalid("dispatch: " + err);
  if (!r.locality().empty() && r.locality() != kLocalityHard && r.locality() != kLocalitySoft)
    return invalid("resources.locality must be \"hard\" or \"soft\" (got \"" + r.locality() +
                   "\")");
  int workers = s.has_workers() ? s.workers() : 1;
  if (workers < 1) return invalid("workers must be >= 1 (got " + num(workers) + ")");
  if (workers > limits.max_workers)
    return invalid("workers must be <= " + num(limits.max_workers) + " (got " + num(workers) + ")");
  if (workers > 1 && r.gpus() == 0)
    return invalid("a gang (workers > 1) must request GPUs per worker");
  if (r.gpu_memory_mb() < 0)
    return invalid("resources.gpu_memory_mb must be >= 0 (got " + num(r.gpu_memory_mb()) + ")");
  if (r.gpu_memory_mb() > kMaxGpuMemoryMb)
    return invalid("resources.gpu_memory_mb " + num(r.gpu_memory_mb()) +
                   " is more than any GPU has (max " + num(kMaxGpuMemoryMb) + ")");
  if (r.gpu_memory_mb() > 0 && (r.gpus() != 1 || workers != 1))
    return invalid(
        "resources.gpu_memory_mb asks for part of one GPU: it needs resources.gpus 1 and one "
        "worker (got gpus " +
        num(r.gpus()) + ", workers " + num(workers) + ")");
  if (int64_t total = int64_t{workers} * r.gpus(); total > limits.max_gpus_per_job)
    return invalid("the job asks for " + num(total) + " GPUs (" + num(workers) + " workers x " +
                   num(r.gpus()) + "); limit max_gpus_per_job " + num(limits.max_gpus_per_job));
  if (!s.priority().empty() && !contains(limits.priority_classes, s.priority())) {
    std::string known;
    for (const auto& c : limits.priority_classes) known += (known.empty() ? "" : ", ") + c;
    return invalid("unknown priority class '" + shown(s.priority()) + "' (known: " + known + ")");
  }
  if (!s.pool().empty()) {
    if (auto err = names::check_token(s.pool()); !err.empty()) return invalid("pool: " + err);
  }
  if (s.max_runtime_s() < 0)
    return invalid("max_runtime_s must be >= 0 (got " + num(s.max_runtime_s()) + ")");
  if (s.max_runtime_s() > limits.max_runtime_s)
    return invalid("max_runtime_s " + num(s.max_runtime_s()) + " is more than " +
                   num(limits.max_runtime_s) + " (limit max_runtime_s, 30 days)");
  if (s.max_retries() < 0)
    return invalid("max_retries must be >= 0 (got " + num(s.max_retries()) + ")");
  if (s.max_retries() > limits.max_retries)
    return invalid("max_retries " + num(s.max_retries()) + " is more than " +
                   num(limits.max_retries) + " (limit max_retries)");
  if (s.has_grace_s() && (s.grace_s() < 0 || s.grace_s() > limits.max_grace_s))
    return invalid("grace_s " + num(s.grace_s()) + " is outside 0.." + num(limits.max_grace_s) +
                   " (limit max_grace_s)");
  if (auto c = control_char(s.checkpoint_signal()); !c.empty())
    return invalid("checkpoint_signal contains the control character " + c);
  for (const auto& [k, v] : s.labels())
    if (auto c = control_char(v); !c.empty())
      return invalid("label " + k + " contains the control character " + c);
  if (auto v = check_array(s, limits); !v.ok()) return v;
  for (const auto& d : s.depends_on()) {
    if (d.job().empty() && d.name().empty())
      return invalid("depends_on: an entry names no job (job: ID, or name: in a pipeline)");
    if (!d.job().empty())
      if (auto err = names::check_token(d.job()); !err.empty())
        return invalid("depends_on: job " + err);
    if (!d.name().empty())
      if (auto err = names::check_token(d.name()); !err.empty())
        return invalid("depends_on: name " + err);
    if (!d.on().empty() && !contains(kDependencyOns, d.on()))
      return invalid("depends_on: unknown on '" + shown(d.on()) + "' for " +
                     (d.job().empty() ? d.name() : d.job()) +
                     " (expected succeeded, failed or finished)");
  }
  return {};
}

std::string validate(const pb::JobSpec& s, const Limits& limits) {
  return check(s, limits).error;
}

}  // namespace troupe::spec
