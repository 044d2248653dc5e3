// What the node agent does with a scheduler -> agent message
// (troupe.sys.node.<node>.launch|stop|forget): wire::open, then a Launch goes
// through decode_launch, validate_launch and the child's environment, paths
// and --simulate parameters; a Stop's fields are read as Agent::handle_stop
// does; a Forget's path is judged as Agent::handle_forget does, and one it
// would remove must be <something>/<job id> with no ".." part.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "node/checkpoint.hpp"
#include "node/launch_spec.hpp"
#include "tests/fuzz/walk.hpp"

namespace {

size_t launch(const troupe::wire::Launch& l) {
  using namespace troupe::node;
  LaunchInfo info = decode_launch(l);
  size_t n = validate_launch(info, true).size() + validate_launch(info, false).size();
  static const std::vector<std::string> base = {"PATH=/usr/bin:/bin", "HOME=/root", "=bad",
                                                "CUDA_VISIBLE_DEVICES=7"};
  for (const auto& kv : build_child_env(base, info)) {
    troupe::fuzz::check(kv.find('=') != std::string::npos && kv.find('=') > 0,
                        "child env entry without KEY=");
    troupe::fuzz::check(kv.find('\0') == std::string::npos, "child env entry holds a NUL byte");
    n += kv.size();
  }
  SimParams sim = sim_params(info);
  troupe::fuzz::check(sim.duration_s >= 0, "negative simulated duration");
  n += static_cast<size_t>(sim.exit_code);
  n += log_path("/var/lib/troupe", info.key).size() +
       work_dir("/var/lib/troupe", info.key.job_id).size();
  n += command_line(info.command).size() + to_string(info.key).size();
  n += cuda_visible_devices(info.gpus).size();
  return n;
}

size_t forget(const troupe::wire::Forget& f) {
  using namespace troupe::node;
  const std::string id = troupe::wire::str(f.job_id());
  const std::string dir =
      resolve_checkpoint_dir("/var/lib/troupe", troupe::wire::str(f.checkpoint_dir()));
  auto why = forget_refusal(id, dir);
  if (why.empty()) {
    troupe::fuzz::check(dir.size() > id.size() + 1 && dir.compare(dir.size() - id.size() - 1,
                                                                  std::string::npos, "/" + id) == 0,
                        "a Forget taken for a dir that is not <...>/<job id>");
    troupe::fuzz::check(
        dir.find("/../") == std::string::npos && dir.find('\0') == std::string::npos,
        "a Forget taken for a dir with a .. part or a NUL byte");
  }
  return why.size() + f.epoch();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace troupe;
  const wire::Envelope* e = wire::open(data, size);
  if (e == nullptr) return 0;
  volatile size_t sink = 0;
  if (const auto* l = e->body_as_Launch()) sink = launch(*l);
  if (const auto* s = e->body_as_Stop()) {
    // As Agent::handle_stop: a C-style cast reaches the private base.
    const auto* table = (const flatbuffers::Table*)(s);
    sink = fuzz::visit(s) + table->CheckField(wire::Stop::VT_GRACE_S);
  }
  if (const auto* f = e->body_as_Forget()) sink = forget(*f);
  (void)sink;
  return 0;
}
