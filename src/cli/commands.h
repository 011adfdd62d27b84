// Each subcommand lives in its own cmd_*.cpp and registers itself with
// M2_REGISTER_COMMAND; main() builds the CLI from the registry, so adding a
// command never touches another file.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace m2::cli {

struct Command {
  CLI::App* app = nullptr;       // the parsed subcommand
  std::function<int()> run;      // runs it; returns the process exit code
};

using CommandFactory = std::function<Command(CLI::App& parent)>;

struct CommandEntry {
  std::string name;
  int order;  // position in --help
  CommandFactory make;
};

bool register_command(std::string name, int order, CommandFactory make);
std::vector<CommandEntry>& command_registry();

}  // namespace m2::cli

#define M2_REGISTER_COMMAND(name, order, factory) \
  static const bool m2_command_registered_##name = ::m2::cli::register_command(#name, order, factory)
