// `nvfp4check reference CASE --out FILE`: the exact RN16 output of a case as raw little-endian
// binary16 in C order (SPEC.md section 6). When the case records `expect`, the output must match
// it: a hand-made case whose expect disagrees means the case or the reference is wrong (exit 1).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "harness/checks.h"
#include "harness/generators.h"
#include "reference/case_file.h"
#include "reference/exact_gemm.h"

namespace nvfp4::cli {
namespace {

struct ReferenceOptions {
  std::string case_path;
  std::string out_path;
};

// Equal as results: the same bits, or both NaN (SPEC.md section 3 accepts any NaN payload).

int run_reference(const ReferenceOptions& opts) {
  Problem p;
  try {
    p = read_case_file(opts.case_path);
    if (!p.has_data()) expand_seeded_case(p);  // a case with only a seed: draw its data
  } catch (const CaseError& e) {
    fmt::print(stderr, "nvfp4check reference: {}\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "nvfp4check reference: {}: {}\n", opts.case_path, e.what());
    return 2;
  }
  const ExactResult ref = exact_gemm(p);

  std::vector<char> bytes(ref.c.size() * 2);
  for (size_t i = 0; i < ref.c.size(); ++i) {  // little-endian whatever the host
    bytes[2 * i] = static_cast<char>(ref.c[i] & 0xFF);
    bytes[2 * i + 1] = static_cast<char>(ref.c[i] >> 8);
  }
  std::ofstream out(opts.out_path, std::ios::binary | std::ios::trunc);
  if (out) out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (out) out.close();
  if (!out) {
    fmt::print(stderr, "nvfp4check reference: cannot write {}: {}\n", opts.out_path, std::strerror(errno));
    return 2;
  }
  fmt::print("{}: {} m={} n={} k={} l={}: wrote {} FP16 outputs to {}\n", opts.case_path, to_string(p.op), p.m,
             p.n, p.k, p.l, ref.c.size(), opts.out_path);

  if (!p.expect) return 0;
  const std::vector<uint16_t>& expect = *p.expect;
  int64_t differing = 0;
  constexpr int64_t kShown = 10;
  for (size_t idx = 0; idx < expect.size(); ++idx) {
    if (fp16_same_result(expect[idx], ref.c[idx])) continue;
    if (differing++ < kShown) {
      const int64_t j = static_cast<int64_t>(idx) % p.n, i = static_cast<int64_t>(idx) / p.n % p.m,
                    b = static_cast<int64_t>(idx) / p.n / p.m;
      fmt::print(stderr, "  b={} i={} j={}: expect {}, reference {}\n", b, i, j, fp16_text(expect[idx]),
                 fp16_text(ref.c[idx]));
    }
  }
  if (differing > 0) {
    fmt::print(stderr,
               "nvfp4check reference: {}: {} of {} outputs differ from the case's expect{}; either the "
               "case or the reference is wrong\n",
               opts.case_path, differing, expect.size(), differing > kShown ? " (first 10 above)" : " (above)");
    return 1;
  }
  fmt::print("{}: all {} outputs match expect\n", opts.case_path, expect.size());
  return 0;
}

}  // namespace

void add_reference_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ReferenceOptions>();
  CLI::App* cmd = app.add_subcommand(
      "reference",
      "Write the exact reference output of a case (raw little-endian binary16, C order). Exits 1 when "
      "the case has an expect line that the reference disagrees with.");
  cmd->add_option("CASE", opts->case_path, "case file (SPEC.md section 4)")->required();
  cmd->add_option("--out", opts->out_path, "where to write the l*m*n FP16 outputs")->required();
  cmd->callback([opts, &exit_code] { exit_code = run_reference(*opts); });
}

}  // namespace nvfp4::cli
