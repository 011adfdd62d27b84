// m2cpp: inference engine and server for the MiniMax-M2 model family.
#include <algorithm>
#include <vector>

#include "cli/commands.h"
#include "util/log.h"

namespace m2::cli {

std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

bool register_command(std::string name, int order, CommandFactory make) {
  command_registry().push_back({std::move(name), order, std::move(make)});
  return true;
}

}  // namespace m2::cli

int main(int argc, char** argv) {
  CLI::App app{"m2cpp: inference engine and server for the MiniMax-M2 model family"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "m2cpp 0.1.0");
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging on stderr");
  app.add_flag("-q,--quiet", quiet, "Only errors on stderr");

  auto entries = m2::cli::command_registry();
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.order < b.order; });
  std::vector<m2::cli::Command> commands;
  for (auto& e : entries) commands.push_back(e.make(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (verbose) m2::set_log_level(m2::LogLevel::kDebug);
  if (quiet) m2::set_log_level(m2::LogLevel::kError);
  for (auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return 1;
}
