// troupe-load's entry point: parses the command line and runs the load run,
// the trace replay (load/run.hpp) or the simulation (load/simulate.hpp).
// Everything else lives in troupe_load_lib.
#include <signal.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>

#include "load/options.hpp"
#include "load/run.hpp"
#include "load/simulate.hpp"

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  // The environment gives --nats, --creds and --tls-ca their defaults.
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
  };
  troupe::load::Environment environment{env("TROUPE_NATS"), env("TROUPE_NATS_CREDS"),
                                        env("TROUPE_NATS_CA")};
  troupe::load::Command c = troupe::load::parse_command_line(argc, argv, environment);
  try {
    switch (c.kind) {
      case troupe::load::Command::run_load:
        return troupe::load::run_load(c.load, std::cout, std::cerr);
      case troupe::load::Command::run_replay:
        return troupe::load::run_replay(c.replay, std::cout, std::cerr);
      case troupe::load::Command::run_simulate:
        return troupe::load::run_simulate(c.replay, std::cout, std::cerr);
      case troupe::load::Command::exit_now:
        break;
    }
  } catch (const std::exception& e) {
    std::cerr << "troupe-load: " << e.what() << "\n";
    return 1;
  }
  (c.exit_code == 0 ? std::cout : std::cerr) << c.message;
  return c.exit_code;
}
