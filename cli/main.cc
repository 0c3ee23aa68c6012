// nvfp4check: proves NVFP4 block-scaled GEMV/GEMM kernels correct or finds a small failing input.
// Exit codes (SPEC.md section 6): 0 all good, 1 a kernel failed a check, 2 bad usage or bad input.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cli/commands.h"

namespace {

bool known_command(CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == name) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // Two settings are read only when the process starts, so the program sets them and starts
  // itself again (once: they are set then; on failure it goes on with the defaults). A user's own
  // value of either is kept.
  // - OpenMP's idle threads spin by default. The suite is two processes at least (the runner and
  //   a kernel's process, often more), so spinning threads of one starve the other: measured here,
  //   37 cases/s with the default and 96 with passive waiting under load.
  // - malloc's blocks in transparent huge pages where the system gives them only on request (THP
  //   "madvise", the common default): a large case's tensors are drawn, sent to the kernel's
  //   process and laid out in fresh memory, gigabytes faulted in 4 KiB at a time otherwise. The
  //   64-expert part of corpus/large against a host kernel: 16-20 s -> 9-10 s on 2 cores.
  bool restart = false;
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    restart = true;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (!tunables || !std::strstr(tunables, "glibc.malloc.hugetlb")) {
    const std::string with = std::string(tunables && *tunables ? tunables : "") +
                             (tunables && *tunables ? ":" : "") + "glibc.malloc.hugetlb=1";
    setenv("GLIBC_TUNABLES", with.c_str(), 1);
    restart = true;
  }
  if (restart) execv("/proc/self/exe", argv);
  // Each case allocates and frees a few hundred KiB (its data, messages, reference) while other
  // threads run. By default glibc gives the top of the heap back to the kernel whenever 128 KiB
  // lie free there, and takes it again for the next case; each give-back flushes the TLB of every
  // core that runs one of the process's threads (an interrupt each, dear in a virtual machine):
  // 40% of small host cases' throughput on 2 cores. Freed memory up to 64 MiB now stays in the
  // process, and blocks up to 32 MiB come from the heap (larger ones are still mapped alone). A
  // kernel's process (`worker`) too: it receives a case's tensors into fresh vectors, and a
  // medium case's megabytes were mapped, faulted in and given back on every case. The buffers
  // a kernel is handed do not come from the heap (device_buffers.cc), so its view is unchanged.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  CLI::App app{"nvfp4check: proves NVFP4 block-scaled GEMV/GEMM kernels correct, or finds a small failing input",
               "nvfp4check"};
  app.require_subcommand(1);
  int exit_code = 0;
  nvfp4::cli::add_reference_command(app, exit_code);
  nvfp4::cli::add_show_command(app, exit_code);
  nvfp4::cli::add_list_command(app, exit_code);
  nvfp4::cli::add_run_command(app, exit_code);
  nvfp4::cli::add_replay_command(app, exit_code);
  nvfp4::cli::add_mutants_command(app, exit_code);
  nvfp4::cli::add_merge_command(app, exit_code);
  // An unknown word where the command goes: say so and list the commands (CLI11 alone says only
  // that a subcommand is required).
  if (argc > 1 && argv[1][0] != '-' && !known_command(app, argv[1])) {
    std::string known;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
      if (!sub->get_group().empty()) known += (known.empty() ? "" : ", ") + sub->get_name();
    fmt::print(stderr, "nvfp4check: unknown command '{}'; the commands are {} (nvfp4check --help)\n",
               std::string(argv[1]).substr(0, 60), known);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help (exit 0) or the error with a hint; its own codes (105, 106, ...) are
    // replaced by SPEC's 2 so scripts need to know only three.
    const int cli11_code = app.exit(e);
    return cli11_code == 0 ? 0 : 2;
  } catch (const std::bad_alloc&) {
    // The case limit bounds a case's tensors; the exact reference takes more (measured: about
    // 100 bytes per output, so 4 * 10^8 outputs in 3.2 GB of tensors need some 40 GB).
    fmt::print(stderr,
               "nvfp4check: out of memory: a case needs about 100 bytes of host memory per output for its exact "
               "reference, besides its tensors (a case near the 4 GiB tensor limit can need 40 GB or more)\n");
    return 2;
  } catch (const std::exception& e) {
    // The commands catch what they expect; anything else still gets a message, never an abort.
    fmt::print(stderr, "nvfp4check: error: {}\n", e.what());
    return 2;
  }
  return exit_code;
}
