// `nvfp4check reference CASE --out FILE`: the exact output of a case as raw little-endian words
// of its output type in C order, a grouped case's groups one after another; a quantize case or a
// block-scaled output (out_type nvfp4): Q's bytes, then SFQ's in linear order (SPEC.md section 6).
// When the case records `expect` (expect_q, expect_sfq), the output must match it: a hand-made
// case whose expect disagrees means the case or the reference is wrong (exit 1).
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

#include "harness/ops/op_module.h"
#include "cli/commands.h"
#include "harness/judge/checks.h"
#include "harness/draw/generators.h"
#include "reference/block_scaled_output.h"
#include "reference/case_file.h"
#include "reference/exact_gemm.h"

namespace nvfp4::cli {
namespace {

struct ReferenceOptions {
  std::string case_path;
  std::string out_path;
};

// "b=0 i=3 j=1", or "g=2 i=3 j=1" for a grouped problem.
std::string position_words(const Problem& p, int64_t index) {
  const OutputPosition pos = output_position(p, index);
  if (pos.g >= 0) return fmt::format("g={} i={} j={}", pos.g, pos.i, pos.j);
  return fmt::format("b={} i={} j={}", pos.b, pos.i, pos.j);
}

std::string shape_words(const Problem& p) {
  if (!op_is_grouped(p.op)) return fmt::format("m={} n={} k={} l={}", p.m, p.n, p.k, p.l);
  return fmt::format("{} groups{}", p.groups.size(), p.packed ? " (packed)" : "");
}

// "m=4 k=64 l=1, bf16 -> nvfp4 by te (16 x 16 tiles)": a quantize case in words.
std::string quantize_words(const Problem& p) {
  return fmt::format("m={} k={} l={}, {} -> {} by {}{}{}", p.m, p.k, p.l, to_string(p.in_type), to_string(p.q_format),
                     to_string(p.recipe), p.quant_2d ? " (16 x 16 tiles)" : "",
                     p.row_global_scale ? " (one global scale per row)" : "");
}

// "recipe te, global scale 2.5": a block-scaled output's recipe and global scale(s) in words.
std::string block_scaled_words(const Problem& p) {
  std::string scales;
  for (const OutUnit& u : out_units(p)) scales += fmt::format("{}{}", scales.empty() ? "" : " ", u.global_scale);
  return fmt::format("recipe {}, global scale{} {}", to_string(p.out_recipe), out_units(p).size() > 1 ? "s" : "", scales);
}

constexpr int64_t kShownBlocks = 8;  // reference blocks described on stdout

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
  const ExactResult ref = op_reference(p);

  // Raw little-endian words of the output type in C order; grouped: the groups one after another;
  // quantize: Q's bytes, then SFQ's in linear order (SPEC section 6).
  std::vector<uint8_t> bytes;
  const bool block_scaled = !op_quantizes(p.op) && p.out_type == OutType::nvfp4;
  if (block_scaled) {
    bytes = block_scaled_expect_bytes(p, ref);
  } else if (op_quantizes(p.op)) {
    bytes = ref.quant->q;
    bytes.insert(bytes.end(), ref.quant->sfq.begin(), ref.quant->sfq.end());
  } else {
    bytes = words_to_bytes(p.out_type, ref.words());
  }
  std::ofstream out(opts.out_path, std::ios::binary | std::ios::trunc);
  if (out) out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (out) out.close();
  if (!out) {
    fmt::print(stderr, "nvfp4check reference: {}: cannot write {}: {}\n", opts.case_path, opts.out_path,
               std::strerror(errno));
    return 2;
  }
  if (block_scaled) {
    fmt::print("{}: {} {} out_type=nvfp4, {}: wrote Q ({} bytes) and SFQ ({} bytes, linear) to {}\n", opts.case_path,
               to_string(p.op), shape_words(p), block_scaled_words(p), out_q_bytes(p), out_sfq_bytes(p), opts.out_path);
    for (const OutBlock& blk : first_out_blocks(p, kShownBlocks))
      fmt::print("  {}: {}\n", out_block_place(p, blk), out_block_words(p, bytes, blk));
  } else if (op_quantizes(p.op))
    fmt::print("{}: quantize {}: wrote Q ({} bytes) and SFQ ({} bytes, linear) to {}\n", opts.case_path,
               quantize_words(p), ref.quant->q.size(), ref.quant->sfq.size(), opts.out_path);
  else
    fmt::print("{}: {} {} out_type={}: wrote {} outputs ({} bytes) to {}\n", opts.case_path, to_string(p.op),
               shape_words(p), to_string(p.out_type), ref.size(), bytes.size(), opts.out_path);

  constexpr size_t kShown = 10;
  const ExpectComparison cmp = compare_expect(p, ref, kShown);
  if (!cmp.any_expect) return 0;
  if (block_scaled && cmp.differing > 0) {
    // The expect lines as a whole output (a missing one taken from the reference), block by block.
    std::vector<uint8_t> recorded = bytes;
    if (p.expect_q) std::copy(p.expect_q->begin(), p.expect_q->end(), recorded.begin());
    if (p.expect_sfq)
      std::copy(p.expect_sfq->begin(), p.expect_sfq->end(), recorded.begin() + static_cast<std::ptrdiff_t>(out_q_bytes(p)));
    const OutBlockDiff d = compare_out_blocks(p, bytes, recorded);
    fmt::print(stderr, "  first differing block: {}\n    expect     {}\n    reference  {}\n", out_block_place(p, *d.first),
               out_block_words(p, recorded, *d.first), out_block_words(p, bytes, *d.first));
    fmt::print(stderr,
               "nvfp4check reference: {}: {} of {} bytes ({} of {} blocks) differ from the case's expect_q and "
               "expect_sfq; either the case or the reference is wrong\n",
               opts.case_path, cmp.differing, cmp.compared, d.differing, d.blocks);
    return 1;
  }
  for (const int64_t idx : cmp.first) {
    if (op_quantizes(p.op)) {
      const int64_t q = static_cast<int64_t>(ref.quant->q.size());
      fmt::print(stderr, "  {} byte {}: expect 0x{:02x}, reference 0x{:02x}\n", idx < q ? "Q" : "SFQ", idx < q ? idx : idx - q,
                 expect_word(p, idx), idx < q ? ref.quant->q[idx] : ref.quant->sfq[idx - q]);
      continue;
    }
    fmt::print(stderr, "  {}: expect {}, reference {}\n", position_words(p, idx),
               word_text(p.out_type, expect_word(p, idx)), word_text(p.out_type, ref.word(static_cast<size_t>(idx))));
  }
  if (cmp.differing > 0) {
    fmt::print(stderr,
               "nvfp4check reference: {}: {} of {} outputs differ from the case's expect{}; either the "
               "case or the reference is wrong\n",
               opts.case_path, cmp.differing, cmp.compared,
               cmp.differing > static_cast<int64_t>(kShown) ? " (first 10 above)" : " (above)");
    return 1;
  }
  if (block_scaled || op_quantizes(p.op))
    fmt::print("{}: all {} bytes match expect_q and expect_sfq\n", opts.case_path, cmp.compared);
  else
    fmt::print("{}: all {} outputs match expect\n", opts.case_path, cmp.compared);
  return 0;
}

}  // namespace

void add_reference_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ReferenceOptions>();
  CLI::App* cmd = app.add_subcommand(
      "reference",
      "Write the exact reference output of a case (raw little-endian words of its out_type, C order; grouped: "
      "the groups one after another; quantize and out_type nvfp4: Q's bytes, then SFQ's in linear order). Exits 1 when "
      "the case has an expect line that the reference disagrees with.");
  cmd->add_option("CASE", opts->case_path, "case file (SPEC.md section 4)")->required();
  cmd->add_option("--out", opts->out_path, "where to write the outputs")->required();
  cmd->callback([opts, &exit_code] { exit_code = run_reference(*opts); });
}

}  // namespace nvfp4::cli
