// troupe-load's entry point: parses the command line and runs the load run or
// the trace replay (load/run.hpp). Everything else lives in troupe_load_lib.
#include <signal.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "load/options.hpp"
#include "load/run.hpp"

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  // --creds FILE / --tls-ca FILE (anywhere on the line) become the
  // environment the connections read (TROUPE_NATS_CREDS, TROUPE_NATS_CA).
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--creds" || a == "--tls-ca") && i + 1 < argc) {
      ::setenv(a == "--creds" ? "TROUPE_NATS_CREDS" : "TROUPE_NATS_CA", argv[i + 1], 1);
      ++i;
      continue;
    }
    args.push_back(argv[i]);
  }
  argc = static_cast<int>(args.size());
  argv = args.data();
  const char* nats = std::getenv("TROUPE_NATS");
  troupe::load::Command c = troupe::load::parse_command_line(
      argc, argv, nats != nullptr ? std::optional<std::string>(nats) : std::nullopt);
  try {
    switch (c.kind) {
      case troupe::load::Command::run_load:
        return troupe::load::run_load(c.load, std::cout, std::cerr);
      case troupe::load::Command::run_replay:
        return troupe::load::run_replay(c.replay, std::cout, std::cerr);
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
