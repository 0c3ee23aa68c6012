// The subcommands of nvfp4check. Each adds itself to the app; its callback stores the exit code
// (SPEC.md section 6: 0 all good, 1 a kernel failed a check, 2 bad usage or bad input).
#pragma once

namespace CLI {
class App;
}

namespace nvfp4::cli {

void add_reference_command(CLI::App& app, int& exit_code);  // reference CASE --out FILE
void add_show_command(CLI::App& app, int& exit_code);       // show CASE
void add_list_command(CLI::App& app, int& exit_code);       // list [--plugin PATH]...
void add_run_command(CLI::App& app, int& exit_code);        // run [...] (the main job)
void add_replay_command(CLI::App& app, int& exit_code);     // replay FILE... [...]
void add_mutants_command(CLI::App& app, int& exit_code);    // mutants [...] (mutation analysis)
void add_merge_command(CLI::App& app, int& exit_code);      // merge REPORT... (run --shard's reports)

}  // namespace nvfp4::cli
