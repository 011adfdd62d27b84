// m2cpp: inference engine and server for the MiniMax-M2 model family.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "util/log.h"
#include "util/version.h"

namespace m2::cli {

std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

bool register_command(std::string name, int order, CommandFactory make) {
  command_registry().push_back({std::move(name), order, std::move(make)});
  return true;
}

// vLLM's multi-letter short name `-tp` (CLI11 takes one letter after a
// single dash): `-tp N` and `-tp=N` are --tensor-parallel-size.
std::vector<std::string> vllm_short_names(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a == "-tp") a = "--tensor-parallel-size";
    else if (a.rfind("-tp=", 0) == 0) a = "--tensor-parallel-size=" + a.substr(4);
  }
  return args;
}

// A GPU tensor-parallel group's collectives spin on the device until every
// peer's has launched. With CUDA's lazy module loading (the default) a rank's
// first launch of a kernel loads it, which may wait for the device while
// holding a lock that the other ranks' launches need: the spinning kernels
// then wait for launches that never come (run 61: tp 4 hung in a first
// launch). Every kernel is loaded at start-up instead when ranks may run on
// GPUs (-tp N > 1), unless the user chose a mode. Before any CUDA call.
void eager_module_loading_for_tensor_parallel(const std::vector<std::string>& args) {
  bool tp = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--tensor-parallel-size" && i + 1 < args.size()) tp |= args[i + 1] != "1";
    if (a.rfind("--tensor-parallel-size=", 0) == 0) tp |= a.substr(23) != "1";
  }
  if (tp) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
}

}  // namespace m2::cli

int main(int argc, char** argv) {
  CLI::App app{"m2cpp: inference engine and server for the MiniMax-M2 model family"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("m2cpp ") + m2::kM2cppVersion);
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging on stderr");
  app.add_flag("-q,--quiet", quiet, "Only errors on stderr");

  auto entries = m2::cli::command_registry();
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.order < b.order; });
  std::vector<m2::cli::Command> commands;
  for (auto& e : entries) commands.push_back(e.make(app));
  try {
    std::vector<std::string> args = m2::cli::vllm_short_names(argc, argv);
    m2::cli::eager_module_loading_for_tensor_parallel(args);
    std::vector<char*> ptrs;
    for (std::string& a : args) ptrs.push_back(a.data());
    app.parse(argc, ptrs.data());
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
