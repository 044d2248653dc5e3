// `troupe submit` input handling (see submit_args.hpp).
#include "gateway/submit_args.hpp"

#include "messages/spec.hpp"

namespace troupe::gateway {

SplitArgs split_at_dashdash(int argc, const char* const* argv) {
  SplitArgs s;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i] != nullptr ? argv[i] : "";
    if (!s.had_dashdash && a == "--" && i > 0) {
      s.had_dashdash = true;
      continue;
    }
    (s.had_dashdash ? s.command : s.options).push_back(std::move(a));
  }
  return s;
}

std::optional<std::pair<std::string, std::string>> parse_env_pair(const std::string& kv) {
  auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) return std::nullopt;
  return std::make_pair(kv.substr(0, eq), kv.substr(eq + 1));
}

BuiltSpec build_spec(const std::optional<std::string>& file_text, const SubmitFlags& f) {
  BuiltSpec b;
  if (file_text) {
    auto p = spec::from_text(*file_text);
    if (!p.ok) {
      b.error = p.error;
      return b;
    }
    b.spec = std::move(p.spec);
  }
  auto& s = b.spec;
  if (f.team) s.set_team(*f.team);
  if (f.name) s.set_name(*f.name);
  if (f.kind) s.set_kind(*f.kind);
  if (f.priority) s.set_priority(*f.priority);
  if (f.idempotency_key) s.set_idempotency_key(*f.idempotency_key);
  if (f.gpus) s.mutable_resources()->set_gpus(*f.gpus);
  if (f.gpu_type) s.mutable_resources()->set_gpu_type(*f.gpu_type);
  if (f.cpus) s.mutable_resources()->set_cpus(*f.cpus);
  if (f.memory_mb) s.mutable_resources()->set_memory_mb(*f.memory_mb);
  if (f.workers) s.set_workers(*f.workers);
  if (f.max_retries) s.set_max_retries(*f.max_retries);
  if (f.max_runtime_s) s.set_max_runtime_s(*f.max_runtime_s);
  for (const auto& kv : f.env) {
    auto pair = parse_env_pair(kv);
    if (!pair) {
      b.error = "--env expects KEY=VALUE, got '" + kv + "'";
      return b;
    }
    (*s.mutable_env())[pair->first] = pair->second;
  }
  for (const auto& a : f.after) {
    auto colon = a.find(':');
    auto* d = s.add_depends_on();
    d->set_job(a.substr(0, colon));
    if (colon != std::string::npos) d->set_on(a.substr(colon + 1));
    if (d->job().empty()) {
      b.error = "--after expects JOB_ID[:succeeded|failed|finished], got '" + a + "'";
      return b;
    }
  }
  if (f.array) {
    // N or N%K, digits only (a range form like Slurm's 0-19 is not taken).
    const std::string& a = *f.array;
    auto pct = a.find('%');
    auto digits = [](const std::string& t) {
      return !t.empty() && t.size() <= 9 && t.find_first_not_of("0123456789") == std::string::npos;
    };
    std::string n = a.substr(0, pct), k = pct == std::string::npos ? "" : a.substr(pct + 1);
    if (!digits(n) || (pct != std::string::npos && !digits(k))) {
      b.error = "--array expects N or N%K (N tasks, at most K at once), got '" + a + "'";
      return b;
    }
    s.mutable_array()->set_count(std::stoi(n));
    if (!k.empty()) s.mutable_array()->set_parallelism(std::stoi(k));
  }
  if (!f.command.empty()) {
    s.clear_command();
    for (const auto& c : f.command) s.add_command(c);
  }
  b.ok = true;
  return b;
}

std::string check_spec(const troupe::pb::JobSpec& spec) {
  troupe::pb::JobSpec copy = spec;
  spec::apply_defaults(copy);
  std::string err = spec::validate(copy);
  if (err == "team is required") return "team is required (--team T, or team: in the spec file)";
  if (err == "command is required")
    return "command is required (put it after --, e.g. troupe submit ... -- python train.py, or "
           "command: in the spec file)";
  return err;
}

}  // namespace troupe::gateway
