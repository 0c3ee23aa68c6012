// `nvfp4check list`: every kernel known (built in or from plugins, which are loaded in a child
// process), its declared info and whether it can run on this machine.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "harness/engine/suite.h"

namespace nvfp4::cli {

void add_list_command(CLI::App& app, int& exit_code) {
  auto plugins = std::make_shared<std::vector<std::string>>();
  auto timeout = std::make_shared<double>(kDefaultCallTimeout);
  CLI::App* list = app.add_subcommand("list", "Every kernel known, its declared info and whether it can run here");
  list->add_option("--plugin", *plugins, "Shared library exporting the nvfp4 kernel ABI (repeatable)");
  list->add_option("--timeout", *timeout, "Seconds loading the plugins (in a child process) may take (default 30)")
      ->check(seconds_in_range(24 * 3600.0));
  list->callback([plugins, timeout, &exit_code] {
    try {
      fmt::print("{}", kernel_table(find_kernels(*plugins, {}, *timeout)));
      exit_code = 0;
    } catch (const std::exception& e) {
      // A plugin that cannot be used: missing symbol, wrong ABI version, a crash while loading.
      fmt::print(stderr, "nvfp4check list: {}\n", e.what());
      exit_code = 2;
    }
  });
}

}  // namespace nvfp4::cli
