// Any bytes from the bus as an Envelope: wire::open verifies them, then every
// field of the body is read the way the actors and the agent read it, and the
// object API unpacks the whole buffer (it follows every offset too).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tests/fuzz/walk.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace troupe;
  const wire::Envelope* e = wire::open(data, size);
  if (e == nullptr) return 0;
  fuzz::check(e->body() != nullptr && e->body_type() != wire::Body::NONE,
              "wire::open let an envelope without a body through");
  volatile size_t sink = fuzz::visit(*e);
  std::unique_ptr<wire::EnvelopeT> unpacked(e->UnPack());
  fuzz::check(unpacked != nullptr, "UnPack of a verified envelope");
  sink = sink + static_cast<size_t>(unpacked->body.type);
  (void)sink;
  return 0;
}
