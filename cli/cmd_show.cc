// `nvfp4check show CASE`: what a case holds, for a person deciding whether it is the case they
// want: shape, layout, semantics, alpha, sizes, histograms of E2M1 codes and scale exponents,
// how many outputs the oracle can demand bit for bit, and the first reference outputs.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "harness/checks.h"
#include "harness/generators.h"
#include "reference/case_file.h"
#include "reference/exact_gemm.h"
#include "reference/oracle.h"
#include "reference/scale_layout.h"

namespace nvfp4::cli {
namespace {

struct ShowOptions {
  std::string case_path;
  int64_t outputs = 8;
};

std::array<int64_t, 16> code_histogram(const std::vector<uint8_t>& packed) {
  std::array<int64_t, 16> h{};
  for (const uint8_t byte : packed) {
    ++h[byte & 0xF];
    ++h[byte >> 4];
  }
  return h;
}

struct ScaleStats {
  std::array<int64_t, 16> exponent{};  // by exponent field (bits 6..3), NaN bytes excluded
  int64_t zero = 0, subnormal = 0, nan = 0, sign = 0;
};

ScaleStats scale_stats(const std::vector<uint8_t>& scales) {
  ScaleStats s;
  for (const uint8_t byte : scales) {
    if ((byte & 0x7F) == 0x7F) {
      ++s.nan;
      continue;
    }
    const int e = (byte >> 3) & 0xF;
    ++s.exponent[e];
    if ((byte & 0x7F) == 0) ++s.zero;
    else if (e == 0) ++s.subnormal;
    if (byte & 0x80) ++s.sign;
  }
  return s;
}

double percent(int64_t part, int64_t whole) { return whole ? 100.0 * part / whole : 0.0; }

int run_show(const ShowOptions& opts) {
  Problem p;
  bool generated = false;
  try {
    p = read_case_file(opts.case_path);
    if (!p.has_data()) {
      expand_seeded_case(p);
      generated = true;
    }
  } catch (const CaseError& e) {
    fmt::print(stderr, "nvfp4check show: {}\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "nvfp4check show: {}: {}\n", opts.case_path, e.what());
    return 2;
  }

  fmt::print("case       {}\n", opts.case_path);
  if (!p.note.empty()) fmt::print("note       {}\n", p.note);
  fmt::print("op         {}  m={} n={} k={} l={}  ({} scale blocks per row)\n", to_string(p.op), p.m, p.n, p.k,
             p.l, p.kb());
  fmt::print("sf_layout  {} (handed to kernels; the file holds scales in linear order)\n",
             to_string(p.sf_layout));
  fmt::print("semantics  {}\n", to_string(p.semantics));
  fmt::print("alpha      {} ({:a})\n", p.alpha, p.alpha);
  if (p.seed) {
    fmt::print("seed       {}  generator {}{}\n", *p.seed, p.generator.empty() ? "(default)" : p.generator,
               generated ? "  (data drawn from it: the case gives none)" : "  (explicit data wins)");
  }
  fmt::print("bytes      a {}  b {}  sfa {}  sfb {}  (permuted: sfa {}  sfb {})  c {}\n", p.a_bytes(), p.b_bytes(),
             p.sfa_bytes(), p.sfb_bytes(), sf_permuted_bytes(p.m, p.kb(), p.l), sf_permuted_bytes(p.n, p.kb(), p.l),
             p.c_elems() * 2);

  const auto ha = code_histogram(p.a), hb = code_histogram(p.b);
  const int64_t na = p.l * p.m * p.k, nb = p.l * p.n * p.k;
  fmt::print("\nE2M1 codes     value         A      %         B      %\n");
  for (int c = 0; c < 16; ++c) {
    // Code 8 is -0: print its sign, which the integer value loses.
    const std::string value = fmt::format("{}{}", c == 8 ? "-" : "", e2m1_twice(static_cast<uint8_t>(c)) / 2.0);
    fmt::print("  0x{:x}        {:>5}  {:>8} {:>6.2f}  {:>8} {:>6.2f}\n", c, value, ha[c], percent(ha[c], na), hb[c],
               percent(hb[c], nb));
  }

  const ScaleStats sa = scale_stats(p.sfa), sb = scale_stats(p.sfb);
  fmt::print("\nscale exponent field (bias 7)   SFA      SFB\n");
  for (int e = 0; e < 16; ++e) {
    if (sa.exponent[e] == 0 && sb.exponent[e] == 0) continue;
    const std::string range = e == 0 ? "zero or subnormal" : fmt::format("[2^{}, 2^{})", e - 7, e - 6);
    fmt::print("  e={:<2} {:<18} {:>8} {:>8}\n", e, range, sa.exponent[e], sb.exponent[e]);
  }
  fmt::print("  zero (0x00, 0x80)         {:>8} {:>8}\n", sa.zero, sb.zero);
  fmt::print("  subnormal                 {:>8} {:>8}\n", sa.subnormal, sb.subnormal);
  fmt::print("  NaN (0x7f, 0xff)          {:>8} {:>8}\n", sa.nan, sb.nan);
  fmt::print("  sign bit set              {:>8} {:>8}  ({})\n", sa.sign, sb.sign,
             p.semantics == ScaleSemantics::e4m3 ? "negates the block under e4m3" : "ignored under ue4m3");

  const ExactResult ref = exact_gemm(p);
  int64_t exact = 0, nan = 0, inf = 0, zero = 0;
  for (size_t idx = 0; idx < ref.elems.size(); ++idx) {
    if (exact_regime(ref.elems[idx], p.alpha)) ++exact;
    const uint16_t h = ref.c[idx];
    if (fp16_is_nan(h)) ++nan;
    else if ((h & 0x7FFF) == 0x7C00) ++inf;
    else if ((h & 0x7FFF) == 0) ++zero;
  }
  const int64_t total = p.c_elems();
  fmt::print("\noutputs    {}  exact regime {} ({:.1f}%: must match RN16 bit for bit under fp32)\n", total, exact,
             percent(exact, total));
  fmt::print("           NaN {}  Inf {}  zero {}\n", nan, inf, zero);

  const int64_t shown = std::min<int64_t>(opts.outputs, total);
  if (shown > 0) fmt::print("\nfirst reference outputs\n     b      i      j  value\n");
  for (int64_t idx = 0; idx < shown; ++idx) {
    const int64_t j = idx % p.n, i = idx / p.n % p.m, b = idx / p.n / p.m;
    fmt::print("  {:>4} {:>6} {:>6}  {}{}\n", b, i, j, fp16_text(ref.c[idx]),
               exact_regime(ref.elems[idx], p.alpha) ? "" : "  (rounding regime)");
  }

  if (!p.expect) return 0;
  int64_t differing = 0, first = -1;
  for (int64_t idx = 0; idx < total; ++idx) {
    const uint16_t want = (*p.expect)[idx], got = ref.c[idx];
    if (want == got || (fp16_is_nan(want) && fp16_is_nan(got))) continue;
    if (differing++ == 0) first = idx;
  }
  if (differing == 0) {
    fmt::print("\nexpect     all {} outputs match the reference\n", total);
    return 0;
  }
  fmt::print("\nexpect     {} of {} outputs DIFFER from the reference; first at index {}: expect {}, reference {}\n",
             differing, total, first, fp16_text((*p.expect)[first]), fp16_text(ref.c[first]));
  return 1;
}

}  // namespace

void add_show_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ShowOptions>();
  CLI::App* cmd = app.add_subcommand(
      "show",
      "Describe a case: shape, layout, histograms of codes and scales, the exact-regime share and the first "
      "reference outputs. Exits 1 when the case's expect line disagrees with the reference.");
  cmd->add_option("CASE", opts->case_path, "case file (SPEC.md section 4)")->required();
  cmd->add_option("--outputs", opts->outputs, "how many reference outputs to list")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->callback([opts, &exit_code] { exit_code = run_show(*opts); });
}

}  // namespace nvfp4::cli
