// Writes the hand-picked seed inputs of corpus/kernel, corpus/reference and corpus/case_file:
// every scale byte, every code pair, tail blocks, tile edges, NaN scales and NaN padding, FP16
// overflow, ties and subnormals, alpha kinds, batches, both layouts and semantics.
// Usage: fuzz_seed_writer CORPUS_ROOT   (rewrites CORPUS_ROOT/<target>/seed-*; regressions, named
// by content hash, are left alone).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/draw/shape_limits.h"
#include "reference/case_file.h"
#include "reference/exact_gemm.h"

namespace {

using nvfp4::Op;
using nvfp4::Problem;
using nvfp4::ScaleSemantics;
using nvfp4::SfLayout;

struct Seed {
  std::string name;
  Problem p;
};

// A fixed, input-independent byte pattern (all 16 codes appear in every few bytes).
uint8_t pattern(int64_t i) { return static_cast<uint8_t>((i * 0x9E + (i >> 3) * 0x35 + 0x17) & 0xFF); }
// Scales in [0.5, 2): the exact regime for small k.
uint8_t narrow_scale(int64_t i) { return static_cast<uint8_t>(0x30 | (pattern(i) & 0x0F)); }

Problem make(Op op, int64_t m, int64_t n, int64_t k, int64_t l, SfLayout layout,
             ScaleSemantics semantics = ScaleSemantics::ue4m3, float alpha = 1.0f) {
  Problem p;
  p.op = op;
  p.m = m;
  p.n = op == Op::gemv ? 1 : n;
  p.k = k;
  p.l = l;
  p.sf_layout = layout;
  p.semantics = semantics;
  p.alpha = alpha;
  p.a.resize(p.a_bytes());
  p.b.resize(p.b_bytes());
  p.sfa.resize(p.sfa_bytes());
  p.sfb.resize(p.sfb_bytes());
  for (size_t i = 0; i < p.a.size(); ++i) p.a[i] = pattern(int64_t(i));
  for (size_t i = 0; i < p.b.size(); ++i) p.b[i] = pattern(int64_t(i) + 7777);
  for (size_t i = 0; i < p.sfa.size(); ++i) p.sfa[i] = narrow_scale(int64_t(i));
  for (size_t i = 0; i < p.sfb.size(); ++i) p.sfb[i] = narrow_scale(int64_t(i) + 555);
  return p;
}

// Sets element x of row `row` (packed E2M1, k/2 bytes per row) to a 4-bit code.
void set_code(std::vector<uint8_t>& packed, int64_t k, int64_t row, int64_t x, uint8_t code) {
  uint8_t& byte = packed[static_cast<size_t>(row * (k / 2) + x / 2)];
  byte = (x & 1) ? static_cast<uint8_t>((byte & 0x0F) | (code << 4)) : static_cast<uint8_t>((byte & 0xF0) | code);
}

std::vector<Seed> seeds() {
  std::vector<Seed> s;
  const auto G = Op::gemm, V = Op::gemv;
  const auto P = SfLayout::permuted, L = SfLayout::linear;

  {  // All 256 scale bytes in A's scales (16 rows x 16 blocks), B's scales 1.0.
    Problem p = make(V, 16, 1, 256, 1, L);
    for (int i = 0; i < 256; ++i) p.sfa[i] = static_cast<uint8_t>(i);
    for (auto& b : p.sfb) b = 0x38;
    s.push_back({"every-scale-byte-gemv", p});
  }
  {
    Problem p = make(G, 16, 3, 256, 1, P, ScaleSemantics::e4m3);
    for (int i = 0; i < 256; ++i) p.sfa[i] = static_cast<uint8_t>(i);
    s.push_back({"every-scale-byte-e4m3-gemm", p});
  }
  {
    Problem p = make(G, 2, 16, 256, 1, P);
    for (int i = 0; i < 256; ++i) p.sfb[i] = static_cast<uint8_t>(i);
    s.push_back({"every-scale-byte-in-sfb-gemm", p});
  }
  {  // Every byte (code pair) of A once; B alternates -1 and +1.
    Problem p = make(V, 16, 1, 32, 1, P);
    for (int i = 0; i < 256; ++i) p.a[i] = static_cast<uint8_t>(i);
    for (auto& b : p.b) b = 0x2A;
    for (auto& b : p.sfa) b = 0x38;
    for (auto& b : p.sfb) b = 0x38;
    s.push_back({"every-code-pair-gemv", p});
  }
  s.push_back({"smallest-k2-gemv", make(V, 1, 1, 2, 1, P)});
  s.push_back({"nan-padding-1x1x2-gemm", make(G, 1, 1, 2, 1, P)});
  s.push_back({"k-tail-18-batched-gemm", make(G, 3, 5, 18, 2, P)});
  s.push_back({"tile-edge-m129-n17-k80-gemm", make(G, 129, 17, 80, 1, P)});
  s.push_back({"tile-edge-m257-k66-l3-gemv", make(V, 257, 1, 66, 3, P)});
  s.push_back({"tile-edge-n129-gemm", make(G, 2, 129, 64, 1, P)});
  s.push_back({"k-past-1024-gemv", make(V, 2, 1, 1042, 1, P)});
  s.push_back({"batches-l4-linear-gemm", make(G, 33, 9, 48, 4, L)});
  s.push_back({"batches-l4-m65-gemv", make(V, 65, 1, 48, 4, P)});
  {  // Every product 6 * 448 * 6 * 448: far beyond FP16, the output must be +Inf.
    Problem p = make(G, 4, 4, 64, 1, P);
    for (auto& b : p.a) b = 0x77;
    for (auto& b : p.b) b = 0x77;
    for (auto& b : p.sfa) b = 0x7E;
    for (auto& b : p.sfb) b = 0x7E;
    s.push_back({"overflow-to-inf-gemm", p});
  }
  {  // Row 0 sums to exactly 65520 (the tie between 65504 and Inf: Inf), row 1 to 65504 (max).
    Problem p = make(V, 2, 1, 32, 1, P);
    for (auto* v : {&p.a, &p.b}) std::fill(v->begin(), v->end(), 0);
    set_code(p.b, 32, 0, 0, 0x6);    // 4
    set_code(p.b, 32, 0, 16, 0x6);   // 4
    for (int row = 0; row < 2; ++row) {
      set_code(p.a, 32, row, 0, 0x6);   // 4
      set_code(p.a, 32, row, 16, 0xE); // -4
    }
    p.sfb = {0x68, 0x38};              // 64, 1
    p.sfa = {0x68, 0x38, 0x68, 0x40};  // row 0: 64, 1; row 1: 64, 2
    s.push_back({"fp16-overflow-threshold-gemv", p});
  }
  {  // Row 0 sums to 2049 (tie: rounds to even 2048), row 1 to 2051 (tie: rounds to 2052).
    Problem p = make(V, 2, 1, 92, 1, L);
    for (auto* v : {&p.a, &p.b}) std::fill(v->begin(), v->end(), 0);
    for (auto& b : p.sfa) b = 0x38;
    for (auto& b : p.sfb) b = 0x38;
    for (int x = 0; x < 92; ++x) set_code(p.b, 92, 0, x, x < 56 ? 0x7 : 0x2);  // 6 or 1
    for (int row = 0; row < 2; ++row) {
      const int ones = row == 0 ? 33 : 35;
      for (int x = 0; x < 56; ++x) set_code(p.a, 92, row, x, 0x7);
      for (int x = 56; x < 56 + ones; ++x) set_code(p.a, 92, row, x, 0x2);
    }
    s.push_back({"fp16-ties-to-even-gemv", p});
  }
  {  // NaN scales in one block of row 3 (0x7F) and row 5 (0xFF); other rows must stay finite.
    Problem p = make(V, 8, 1, 64, 1, P);
    p.sfa[3 * 4 + 2] = 0x7F;
    p.sfa[5 * 4 + 0] = 0xFF;
    s.push_back({"nan-scale-one-block-gemv", p});
  }
  {
    Problem p = make(G, 5, 3, 48, 2, L);
    for (size_t i = 0; i < p.sfa.size(); ++i) p.sfa[i] = static_cast<uint8_t>(0x01 + i % 7);
    for (size_t i = 0; i < p.sfb.size(); ++i) p.sfb[i] = static_cast<uint8_t>((i & 1 ? 0x80 : 0) | (0x01 + i % 7));
    s.push_back({"subnormal-scales-gemm", p});
  }
  {  // 0.5 * 0.5 * 2^-9 * 2^-9 per product: FP16 subnormal outputs.
    Problem p = make(V, 4, 1, 32, 1, P);
    for (auto& b : p.a) b = 0x11;
    for (auto& b : p.b) b = 0x11;
    for (int x = 0; x < 16; ++x) set_code(p.a, 32, 1, x, 0);  // row 1: half the sum, 2^-16
    for (auto& b : p.sfa) b = 0x01;
    for (auto& b : p.sfb) b = 0x01;
    s.push_back({"fp16-subnormal-outputs-gemv", p});
  }
  {  // +6 and -6 alternate against constant B: every sum is exactly 0, the output +0.
    Problem p = make(G, 3, 3, 64, 1, P);
    for (auto& b : p.a) b = 0xF7;
    for (auto& b : p.b) b = 0x22;
    s.push_back({"cancellation-exact-zero-gemm", p});
  }
  {
    Problem p = make(G, 3, 2, 32, 1, P, ScaleSemantics::e4m3);
    for (size_t i = 0; i < p.sfa.size(); ++i) p.sfa[i] = i % 2 ? 0x80 : 0x00;
    s.push_back({"zero-scales-e4m3-gemm", p});
  }
  {
    Problem p = make(G, 4, 4, 32, 1, P, ScaleSemantics::e4m3);
    for (size_t i = 0; i < p.sfa.size(); ++i) p.sfa[i] = i % 2 ? 0xB8 : 0x38;
    for (size_t i = 0; i < p.sfb.size(); ++i) p.sfb[i] = i % 3 ? 0x40 : 0xC0;
    s.push_back({"sign-bit-scales-e4m3-gemm", p});
  }
  s.push_back({"alpha-pow2-gemm", make(G, 7, 5, 64, 1, P, ScaleSemantics::ue4m3, 0.125f)});
  s.push_back({"alpha-negative-gemv", make(V, 9, 1, 48, 1, L, ScaleSemantics::ue4m3, -1.0f)});
  {
    Problem p = make(G, 7, 5, 64, 1, P, ScaleSemantics::ue4m3, 0.1f);
    for (size_t i = 0; i < p.sfa.size(); ++i) p.sfa[i] = static_cast<uint8_t>(pattern(int64_t(i) * 3) % 0x7F);
    s.push_back({"alpha-arbitrary-full-range-gemm", p});
  }
  {  // Scales over the whole finite range and k = 1024: outputs in the rounding regime.
    Problem p = make(G, 2, 2, 1024, 1, P);
    for (size_t i = 0; i < p.sfa.size(); ++i) p.sfa[i] = static_cast<uint8_t>(pattern(int64_t(i) * 5) % 0x7F);
    for (size_t i = 0; i < p.sfb.size(); ++i) p.sfb[i] = static_cast<uint8_t>(pattern(int64_t(i) * 11) % 0x7F);
    s.push_back({"rounding-regime-full-range-gemm", p});
  }
  return s;
}

// Whether the reference fuzzer takes p: its brute force is for small problems only.
bool fits_reference_fuzzer(const Problem& p) {
  const nvfp4::ShapeLimits lim = nvfp4::reference_fuzz_shape_limits();
  return p.m <= lim.max_m && p.n <= lim.max_n && p.k <= lim.max_k && p.l <= lim.max_l &&
         p.l * p.m * p.n * p.k <= lim.max_products;
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// Case texts the parser must reject cleanly, or accept in an unusual spelling.
const std::vector<std::pair<std::string, std::string>>& hand_written_cases() {
  static const std::vector<std::pair<std::string, std::string>> cases = {
      {"unknown-key", "op = gemv\nm = 1\nk = 2\nl = 1\ncolour = red\nseed = 1\n"},
      {"duplicate-key", "op = gemv\nm = 1\nm = 2\nk = 2\nl = 1\nseed = 1\n"},
      {"odd-k", "op = gemm\nm = 1\nn = 1\nk = 3\nl = 1\nseed = 1\n"},
      {"gemv-with-n-2", "op = gemv\nm = 1\nn = 2\nk = 2\nl = 1\nseed = 1\n"},
      {"missing-op", "m = 1\nk = 2\nl = 1\nseed = 1\n"},
      {"missing-data-and-seed", "op = gemv\nm = 1\nk = 2\nl = 1\n"},
      {"short-a", "op = gemv\nm = 2\nk = 4\nl = 1\na = 12\nb = 34\nsfa = 38 38\nsfb = 38\n"},
      {"bad-hex", "op = gemv\nm = 1\nk = 2\nl = 1\na = zz\nb = 34\nsfa = 38\nsfb = 38\n"},
      {"some-data-missing", "op = gemv\nm = 1\nk = 2\nl = 1\na = 12\nb = 34\nsfa = 38\n"},
      {"alpha-inf", "op = gemv\nm = 1\nk = 2\nl = 1\nalpha = inf\nseed = 1\n"},
      {"alpha-overflow", "op = gemv\nm = 1\nk = 2\nl = 1\nalpha = 1e39\nseed = 1\n"},
      {"alpha-hex-float", "op = gemv\nm = 1\nk = 2\nl = 1\nalpha = -0x1.8p-3\nseed = 1\n"},
      {"huge-shape", "op = gemm\nm = 1099511627776\nn = 1099511627776\nk = 2\nl = 1\nseed = 1\n"},
      {"negative-m", "op = gemv\nm = -1\nk = 2\nl = 1\nseed = 1\n"},
      {"seed-and-generator", "# nvfp4check case v1\nop = gemm\nm = 3\nn = 2\nk = 34\nl = 2\n"
                             "seed = 42\ngenerator = edge/near_max/pow2\nnote = a seeded case\n"},
      {"generator-without-seed", "op = gemv\nm = 1\nk = 2\nl = 1\ngenerator = uniform/narrow/one\n"},
      {"crlf-bom-comments", "\xEF\xBB\xBFop = gemv # comment\r\nm = 1\r\n\r\n# only a comment\r\nk = 2\r\nl = 1\r\n"
                            "a = 2a\r\nb = 22\r\nsfa = 38\r\nsfb = 38\r\nexpect = 0000\r\n"},
      {"expect-wrong-length", "op = gemv\nm = 1\nk = 2\nl = 1\na = 2a\nb = 22\nsfa = 38\nsfb = 38\nexpect = 0000 0000\n"},
      {"nul-byte", std::string("op = gemv\nm = 1\0\nk = 2\nl = 1\nseed = 1\n", 38)},
      {"invalid-utf8", "op = gemv\nm = 1\nk = 2\nl = 1\nnote = \xC3\x28\nseed = 1\n"},
      {"no-equals", "op gemv\n"},
      {"empty", ""},
      // Revision 3: output types, grouped and dual GEMM.
      {"out-type-fp32", "op = gemm\nm = 1\nn = 2\nk = 2\nl = 1\nout_type = fp32\na = 22\nb = 2222\nsfa = 38\n"
                        "sfb = 3838\nexpect = 40000000 40000000\n"},
      {"out-type-bf16-short-words", "op = gemv\nm = 1\nk = 2\nl = 1\nout_type = bf16\na = 22\nb = 22\n"
                                    "sfa = 38\nsfb = 38\nexpect = 40000000\n"},
      {"out-type-unknown", "op = gemv\nm = 1\nk = 2\nl = 1\nout_type = fp8\nseed = 1\n"},
      {"dual-gemm", "op = dual_gemm\nm = 1\nn = 2\nk = 2\nl = 1\nout_type = bf16\nalpha2 = -0.5\na = 22\n"
                    "b = 2222\nb2 = 2a2a\nsfa = 38\nsfb = 3838\nsfb2 = 38ff\nexpect = 0000 7fc0\n"},
      {"dual-gemm-missing-b2", "op = dual_gemm\nm = 1\nn = 1\nk = 2\nl = 1\na = 22\nb = 22\nsfa = 38\n"
                               "sfb = 38\nsfb2 = 38\n"},
      {"dual-gemm-seed-only", "op = dual_gemm\nm = 1\nn = 1\nk = 2\nl = 1\nseed = 1\n"},
      {"b2-in-gemm", "op = gemm\nm = 1\nn = 1\nk = 2\nl = 1\nb2 = 22\nseed = 1\n"},
      {"grouped-gemm", "op = grouped_gemm\ngroups = 3\ngroup_m = 2 0 1\ngroup_n = 1 4 1\ngroup_k = 2 4 2\n"
                       "group_alpha = 1 2 0.5\na.0 = 2233\nb.0 = 44\nsfa.0 = 3838\nsfb.0 = 38\na.2 = 22\n"
                       "b.2 = 22\nsfa.2 = 38\nsfb.2 = 38\nexpect.2 = 3c00\n"},
      {"grouped-gemm-packed", "op = grouped_gemm\ngroups = 2\ngroup_m = 1 0\ngroup_n = 1\ngroup_k = 2\n"
                              "packed = true\nout_type = fp32\na.0 = 22\nb.0 = 22\nsfa.0 = 38\nsfb.0 = 38\n"},
      {"grouped-gemm-all-empty", "op = grouped_gemm\ngroups = 2\ngroup_m = 0 0\ngroup_n = 7\ngroup_k = 64\n"},
      {"grouped-data-in-empty-group", "op = grouped_gemm\ngroups = 2\ngroup_m = 1 0\ngroup_n = 1\ngroup_k = 2\n"
                                      "a.0 = 22\nb.0 = 22\nsfa.0 = 38\nsfb.0 = 38\na.1 = 22\n"},
      {"grouped-packed-two-k", "op = grouped_gemm\ngroups = 2\ngroup_m = 1 1\ngroup_n = 1\ngroup_k = 2 4\n"
                               "packed = true\nseed = 1\n"},
      {"grouped-group-out-of-range", "op = grouped_gemm\ngroups = 1\ngroup_m = 1\ngroup_n = 1\ngroup_k = 2\n"
                                     "a.0 = 22\nb.0 = 22\nsfa.0 = 38\nsfb.0 = 38\nexpect.1 = 3c00\n"},
      {"grouped-with-m", "op = grouped_gemm\ngroups = 1\ngroup_m = 1\ngroup_n = 1\ngroup_k = 2\nm = 1\n"},
  };
  return cases;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path root = argv[1];
  for (const char* target : {"kernel", "reference", "case_file"}) {
    fs::create_directories(root / target);
    for (const auto& entry : fs::directory_iterator(root / target)) {
      if (entry.path().filename().string().rfind("seed-", 0) == 0) fs::remove(entry.path());
    }
  }
  int written = 0;
  for (const Seed& seed : seeds()) {
    // The fuzzers draw binary inputs through the suite's draw (harness/draw/schedule.h), which
    // has no inverse: their seeds are the problems as case files, which they read as text.
    Problem as_case = seed.p;
    as_case.note = "seed " + seed.name;
    const std::string text = nvfp4::write_case(as_case);
    write_file(root / "kernel" / ("seed-" + seed.name + ".case"), text);
    ++written;
    if (fits_reference_fuzzer(seed.p)) {
      write_file(root / "reference" / ("seed-" + seed.name + ".case"), text);
      ++written;
    }
    // The case-file fuzzer skips inputs over 64 KiB; record the exact output in the small ones.
    Problem with_expect = seed.p;
    nvfp4::set_expect(with_expect, nvfp4::exact_gemm(seed.p));
    with_expect.note = "seed " + seed.name;
    const std::string expect_text = nvfp4::write_case(with_expect);
    if (expect_text.size() <= 64 * 1024) {
      write_file(root / "case_file" / ("seed-" + seed.name + ".case"), expect_text);
      ++written;
    }
  }
  for (const auto& [name, text] : hand_written_cases()) {
    write_file(root / "case_file" / ("seed-" + name + ".case"), text);
    ++written;
  }
  // The quantize op's hand cases (corpus/quantize, expect lines from exact fractions): case-file
  // seeds for its keys, and kernel seeds a quantizer under the kernel fuzzer reads as text.
  std::vector<fs::path> quantize;
  if (fs::is_directory(root / "quantize"))
    for (const auto& entry : fs::directory_iterator(root / "quantize"))
      if (entry.path().extension() == ".case") quantize.push_back(entry.path());
  std::sort(quantize.begin(), quantize.end());
  for (const fs::path& path : quantize) {
    const Problem q = nvfp4::read_case_file(path.string());
    const std::string text = nvfp4::write_case(q);
    if (text.size() > 64 * 1024) continue;
    write_file(root / "case_file" / ("seed-quantize-" + path.stem().string() + ".case"), text);
    write_file(root / "kernel" / ("seed-quantize-" + path.stem().string() + ".case"), text);
    written += 2;
  }
  // One seeded case among the kernel inputs: text inputs are case files there too.
  for (const auto& [name, text] : hand_written_cases()) {
    if (name == "seed-and-generator") {
      write_file(root / "kernel" / "seed-seeded-generator.case", text);
      ++written;
    }
  }
  // Grouped and dual GEMM as seeded cases (the binary encoding holds GEMV and GEMM only), one n
  // and one k so that packed kernels take them too: experts of 129, 0, 1 and 257 rows (a ragged
  // tile, an expert without tokens, one token, a third tile) with k = 80 (a k tail and a partial
  // scale tile) and alphas of their own; a call where every expert is empty; a dual GEMM with BF16
  // outputs over two batches.
  const std::pair<const char*, const char*> kernel_only[] = {
      {"grouped-gemm-seeded",
       "op = grouped_gemm\ngroups = 4\ngroup_m = 129 0 1 257\ngroup_n = 24\ngroup_k = 80\nseed = 158\n"
       "generator = uniform/narrow/pow2\nnote = seed grouped-gemm-seeded\n"},
      {"grouped-gemm-all-empty",
       "op = grouped_gemm\ngroups = 3\ngroup_m = 0 0 0\ngroup_n = 64\ngroup_k = 128\n"
       "note = seed grouped-gemm-all-empty: no expert received a token\n"},
      {"dual-gemm-seeded-bf16",
       "op = dual_gemm\nm = 129\nn = 17\nk = 80\nl = 2\nout_type = bf16\nalpha2 = 0.5\nseed = 7\n"
       "generator = uniform/narrow/one\nnote = seed dual-gemm-seeded-bf16\n"},
  };
  for (const auto& [name, text] : kernel_only) {
    write_file(root / "kernel" / ("seed-" + std::string(name) + ".case"), text);
    ++written;
  }
  std::printf("wrote %d seed files under %s\n", written, root.c_str());
  return 0;
}
