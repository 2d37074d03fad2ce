// scangate: the HTTP service binary. main() parses the command line (server/config/config.h) and hands over to the
// App (server/app.h), which owns start-up order and shutdown. Exit codes: 0 (stopped by SIGTERM/SIGINT, or
// --help/--version), 1 (start-up failed), 2 (configuration).
#include <iostream>
#include <utility>

#include "server/app.h"
#include "server/config/config.h"
#include "server/retire_instance.h"

int main(int argc, char** argv) {
  using namespace scangate::server;
  Config config;
  try {
    ParseOutcome parsed = ParseConfig(argc, argv);
    if (!parsed.config) {
      std::cout << parsed.help;
      return 0;
    }
    config = std::move(*parsed.config);
  } catch (const ConfigError& e) {
    std::cerr << "scangate: " << e.what() << "\n(see scangate --help)\n";
    return kExitConfig;
  }
  if (!config.retire_instance.empty()) return RetireInstance(config);  // a one-shot command (issue 42)
  return App(std::move(config)).Run();
}
