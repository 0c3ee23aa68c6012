// Argument checks shared by the commands (see arguments.h).
#include "cli/arguments.h"

#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "reference/problem.h"

namespace nvfp4::cli {

unsigned usable_cpus() {
  // OpenMP's count, as the lanes' teams take their share by it (suite.cc, mutation_driver.cc):
  // the calling thread's affinity mask. hardware_concurrency counts the machine's CPUs, which a
  // one-CPU Slurm task on a 128-core node would take for its own.
  return static_cast<unsigned>(std::max(1, omp_get_num_procs()));
}

// A lane's parent and kernel process take turns (the kernel's calls, then the reference and the
// judging), so a lane keeps less than a core busy. On an H100 host with 16 cores, 12 lanes against
// 8 checked 9-13% more medium GEMVs a second and 6-25% more grouped cases, the other rows -7% to
// +36% (bench/THROUGHPUT.md); the quarter of the cores left over runs the parent's OpenMP teams.
// At least two, since one lane's parent and kernel take turns and would leave the second core idle.
int default_run_jobs(unsigned cpus, size_t gpus) {
  const unsigned share = cpus * 3 / 4 / static_cast<unsigned>(std::max<size_t>(1, gpus));
  return static_cast<int>(std::clamp(share, 2u, 12u));
}

CLI::Validator seconds_in_range(double max_s) {
  return CLI::Validator(
      [max_s](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0 || v > max_s)
          return fmt::format("'{}' is not a number of seconds in (0, {:g}]", text.substr(0, 40), max_s);
        return "";
      },
      fmt::format("SECONDS in (0, {:g}]", max_s));
}

CLI::Validator count_in_range(int64_t max) {
  return CLI::Validator(
      [max](std::string& text) -> std::string {
        bool digits = !text.empty() && text.size() <= 19;
        for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
        if (!digits || std::stoll(text) < 1 || std::stoll(text) > max)
          return fmt::format("'{}' is not a whole number in [1, {}]", text.substr(0, 40), max);
        return "";
      },
      fmt::format("N in [1, {}]", max));
}

CLI::Validator unsigned_seed() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        bool digits = !text.empty() && text.size() <= 20;
        for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
        if (digits && (text.size() < 20 || text <= "18446744073709551615")) return "";
        return fmt::format("'{}' is not a seed: a whole number in [0, 2^64)", text.substr(0, 40));
      },
      "SEED in [0, 2^64)");
}

Shape parse_shape(const std::string& text) {
  int64_t v[4] = {0, 0, 0, 1};
  int count = 0;
  size_t pos = 0;
  std::string error;
  while (count < 4) {
    size_t used = 0;
    while (pos + used < text.size() && std::isdigit(static_cast<unsigned char>(text[pos + used]))) ++used;
    if (used == 0) break;
    if (used > 12) {
      error = "a dimension of more than 12 digits";
      break;
    }
    v[count++] = std::stoll(text.substr(pos, used));
    pos += used;
    if (pos == text.size() || text[pos] != 'x') break;
    ++pos;
  }
  Shape s;
  s.m = v[0];
  s.n = v[1];
  s.k = v[2];
  s.l = v[3];
  s.op = s.n == 1 ? Op::gemv : Op::gemm;
  if (error.empty() && (count < 3 || pos != text.size())) error = "expected MxNxK or MxNxKxL";
  if (error.empty()) error = case_shape_error(s);
  if (!error.empty()) throw std::invalid_argument(fmt::format("--shape {}: {}", text.substr(0, 60), error));
  return s;
}

}  // namespace nvfp4::cli
