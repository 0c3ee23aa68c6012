// Times the exact GPU reference on production shapes, NVFP4 and MX operands: the decode and
// compute kernels by CUDA events (MX: one kernel that decodes as it loads), the whole call
// (copies of inputs and of every element's facts back, and for MX the host's rounding of them)
// by the host clock; with --cpu also the CPU reference once per MX shape of at most 2^32
// products, for the ratio. Prints a table and writes JSON: gpu_reference_bench [--json FILE]
// [--repeat N] [--only gemv|gemm] [--formats nvfp4|mx] [--cpu].
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_reference/exact_gemm_gpu.h"
#include "harness/draw/generators.h"

int main(int argc, char** argv) {
  std::string json_path;
  int repeat = 5;
  std::string only;     // "gemv" or "gemm": that op's shapes alone
  std::string formats;  // "nvfp4" or "mx": those operands' shapes alone
  bool cpu = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--formats") && i + 1 < argc) {
      formats = argv[++i];
    } else if (!std::strcmp(argv[i], "--cpu")) {
      cpu = true;
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE] [--repeat N] [--only gemv|gemm] [--formats nvfp4|mx] [--cpu]\n",
                   argv[0]);
      return 2;
    }
  }
  std::string why;
  if (!nvfp4::gpu_reference_available(&why)) {
    std::fprintf(stderr, "gpu_reference_bench: %s\n", why.c_str());
    return 2;
  }
  using nvfp4::BlockFormat;
  struct Case {
    nvfp4::Op op;
    int64_t m, n, k, l;
    BlockFormat a = BlockFormat::nvfp4, b = BlockFormat::nvfp4;
  };
  const Case cases[] = {
      {nvfp4::Op::gemv, 7168, 1, 16384, 1}, {nvfp4::Op::gemv, 4096, 1, 7168, 8},
      {nvfp4::Op::gemv, 7168, 1, 2048, 4},  {nvfp4::Op::gemv, 7169, 1, 16400, 3},
      {nvfp4::Op::gemm, 128, 7168, 16384, 1}, {nvfp4::Op::gemm, 4096, 4096, 4096, 1},
      {nvfp4::Op::gemm, 8192, 8192, 8192, 1},
      // MX: MXFP4 weights against MXFP8 activations (MoE decode and prefill, both orders), MXFP8
      // both sides, E5M2 gradients, and the schedule's large class at its 2^26-product edge.
      // The MX reference keeps about 200 bytes of facts per output (two 704-bit accumulators),
      // so its shapes stop at 2^24 outputs.
      {nvfp4::Op::gemv, 7168, 1, 16384, 1, BlockFormat::mxfp4, BlockFormat::mxfp8_e4m3},
      {nvfp4::Op::gemv, 4096, 1, 7168, 8, BlockFormat::mxfp8_e4m3, BlockFormat::mxfp8_e4m3},
      {nvfp4::Op::gemm, 128, 7168, 16384, 1, BlockFormat::mxfp8_e4m3, BlockFormat::mxfp4},
      {nvfp4::Op::gemm, 1040, 1040, 62, 1, BlockFormat::mxfp4, BlockFormat::mxfp8_e5m2},
      {nvfp4::Op::gemm, 1024, 1024, 4096, 1, BlockFormat::mxfp8_e5m2, BlockFormat::mxfp8_e5m2},
      {nvfp4::Op::gemm, 4096, 4096, 4096, 1, BlockFormat::mxfp4, BlockFormat::mxfp4},
  };
  const uint64_t seed = 7;
  std::printf("seed %llu, median of %d calls each\n", static_cast<unsigned long long>(seed), repeat);
  std::printf("%-5s %-23s %6s %6s %6s %3s %10s %11s %10s%s\n", "op", "formats", "m", "n", "k", "l", "decode ms",
              "compute ms", "total ms", cpu ? "     cpu ms" : "");
  nlohmann::json out = nlohmann::json::array();
  nvfp4::Rng rng(seed);
  for (const Case& c : cases) {
    const bool mx = c.a != BlockFormat::nvfp4 || c.b != BlockFormat::nvfp4;
    if (!only.empty() && only != nvfp4::to_string(c.op)) continue;
    if (!formats.empty() && formats != (mx ? "mx" : "nvfp4")) continue;
    nvfp4::Problem p;
    p.op = c.op;
    p.m = c.m;
    p.n = c.n;
    p.k = c.k;
    p.l = c.l;
    p.a_format = c.a;
    p.b_format = c.b;
    nvfp4::fill_data(rng, nvfp4::DataSpec::parse("uniform/full/one"), p);
    std::vector<nvfp4::GpuReferenceTiming> t(repeat);
    for (int r = 0; r < repeat; ++r) nvfp4::exact_gemm_gpu(p, &t[r]);
    auto median = [&](auto field) {
      std::vector<double> v;
      for (const auto& x : t) v.push_back(x.*field);
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double dec = median(&nvfp4::GpuReferenceTiming::decode_ms);
    const double comp = median(&nvfp4::GpuReferenceTiming::compute_ms);
    const double total = median(&nvfp4::GpuReferenceTiming::total_ms);
    double cpu_ms = -1;
    if (cpu && mx && static_cast<double>(c.l) * c.m * c.n * c.k <= 0x1p32) {
      const auto start = std::chrono::steady_clock::now();
      nvfp4::exact_gemm(p);
      cpu_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    const std::string fmts = mx ? std::string(nvfp4::to_string(c.a)) + " x " + nvfp4::to_string(c.b) : "nvfp4";
    std::printf("%-5s %-23s %6lld %6lld %6lld %3lld %10.3f %11.3f %10.1f", nvfp4::to_string(c.op), fmts.c_str(),
                static_cast<long long>(c.m), static_cast<long long>(c.n), static_cast<long long>(c.k),
                static_cast<long long>(c.l), dec, comp, total);
    if (cpu_ms >= 0) std::printf(" %10.1f", cpu_ms);
    std::printf("\n");
    nlohmann::json row = {{"op", nvfp4::to_string(c.op)}, {"a_format", nvfp4::to_string(c.a)},
                          {"b_format", nvfp4::to_string(c.b)}, {"m", c.m}, {"n", c.n}, {"k", c.k}, {"l", c.l},
                          {"decode_ms", dec}, {"compute_ms", comp}, {"total_ms", total}};
    if (cpu_ms >= 0) row["cpu_ms"] = cpu_ms;
    out.push_back(row);
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
