// A JSON job spec (troupe submit, the gateway, the router's JSON submit):
// spec::from_json, defaults, spec::validate. A spec that parses must print
// (spec::to_json) as JSON that parses back to the same spec.
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>

#include "messages/spec.hpp"
#include "tests/fuzz/walk.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace troupe;
  spec::Parsed p = spec::from_json(fuzz::text(data, size));
  if (!p.ok) {
    fuzz::check(!p.error.empty(), "a refused JSON spec without a reason");
    return 0;
  }
  spec::Parsed back = spec::from_json(spec::to_json(p.spec));
  fuzz::check(back.ok, "spec::to_json printed JSON that spec::from_json refuses");
  fuzz::check(google::protobuf::util::MessageDifferencer::Equivalent(p.spec, back.spec),
              "spec changed on its way through spec::to_json");
  spec::apply_defaults(p.spec);
  volatile size_t sink = spec::validate(p.spec).size();
  (void)sink;
  return 0;
}
