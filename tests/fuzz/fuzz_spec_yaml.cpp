// A job spec file (troupe submit FILE): spec::from_text (YAML unless it
// starts with '{'), spec::from_yaml and spec::parse_text, then defaults and
// spec::validate. The three must agree on whether the text is a spec.
#include <cstddef>
#include <cstdint>

#include "messages/spec.hpp"
#include "tests/fuzz/walk.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace troupe;
  auto text = fuzz::text(data, size);
  spec::Parsed p = spec::from_text(text);
  pb::JobSpec other;
  std::string err = spec::parse_text(text, other);
  fuzz::check(p.ok == err.empty(), "spec::from_text and spec::parse_text disagree");
  auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') {
    spec::Parsed y = spec::from_yaml(text);
    fuzz::check(y.ok == p.ok, "spec::from_text and spec::from_yaml disagree");
  }
  if (!p.ok) return 0;
  spec::apply_defaults(p.spec);
  volatile size_t sink = spec::validate(p.spec).size() + spec::to_json(p.spec).size();
  (void)sink;
  return 0;
}
