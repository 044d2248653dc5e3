// A submission on troupe.<team>.submit as the router reads it: JSON when the
// first non-blank byte is '{', else a FlatBuffers SubmitRequest (wire::open,
// spec::from_wire); then defaults, spec::validate and admission under the
// open config and a closed one. An accepted spec must survive
// spec::to_wire -> wire::open -> spec::from_wire unchanged.
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>

#include "actors/policy/config.hpp"
#include "messages/spec.hpp"
#include "tests/fuzz/walk.hpp"

namespace {

using namespace troupe;

const policy::ClusterConfig& closed_config() {
  static const policy::ClusterConfig cfg = [] {
    policy::ClusterConfig c;
    auto err = policy::load_config(
        "pools: [{name: a100, gpu_type: a100}, {name: h100, gpu_type: h100}]\n"
        "teams: [{name: vision, quotas: {a100: {guaranteed: 8, limit: 16}}}, {name: nlp}]\n",
        c);
    fuzz::check(err.empty(), "the fuzz target's own config loads");
    return c;
  }();
  return cfg;
}

void round_trip(const pb::JobSpec& s) {
  flatbuffers::FlatBufferBuilder fbb;
  auto bytes = wire::seal(fbb, wire::CreateSubmitRequest(fbb, spec::to_wire(fbb, s)));
  const wire::Envelope* e = wire::open(bytes);
  fuzz::check(e != nullptr && e->body_as_SubmitRequest() != nullptr,
              "wire::open refuses what spec::to_wire built");
  spec::Parsed back = spec::from_wire(e->body_as_SubmitRequest()->spec());
  fuzz::check(back.ok, "spec::from_wire refuses what spec::to_wire built");
  // The wire form has no checkpoint_signal or grace_s (the router keeps the
  // protobuf spec for those), and none of the fields only JSON and YAML
  // carry: labels, array, sweep, dispatch, a pipeline member's depends_on by
  // name (found by CI: a spec with labels came back without them).
  pb::JobSpec want = s;
  want.clear_checkpoint_signal();
  want.clear_grace_s();
  want.clear_labels();
  want.clear_array();
  want.clear_sweep();
  want.clear_dispatch();
  for (auto& d : *want.mutable_depends_on()) d.clear_name();
  fuzz::check(google::protobuf::util::MessageDifferencer::Equivalent(want, back.spec),
              "spec changed on its way through the wire form");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* end = data + size;
  const uint8_t* first = std::find_if(data, end, [](uint8_t c) { return !std::isspace(c); });
  spec::Parsed p;
  if (first != end && *first == '{') {
    p = spec::from_json(fuzz::text(data, size));
  } else {
    const wire::Envelope* e = wire::open(data, size);
    if (e == nullptr || e->body_as_SubmitRequest() == nullptr) return 0;
    p = spec::from_wire(e->body_as_SubmitRequest()->spec());
  }
  if (!p.ok) return 0;
  pb::JobSpec& s = p.spec;
  if (s.team().empty()) s.set_team("vision");
  spec::apply_defaults(s);
  round_trip(s);
  if (!spec::validate(s).empty()) return 0;
  static const policy::ClusterConfig open = policy::open_config();
  for (const auto* cfg : {&open, &closed_config()}) {
    auto a = policy::admit(*cfg, s.team(), s.pool(), s.resources().gpu_type(), s.resources().gpus(),
                           s.priority());
    fuzz::check(!a.error.empty() || !a.pool.empty(), "admitted without a pool");
  }
  return 0;
}
