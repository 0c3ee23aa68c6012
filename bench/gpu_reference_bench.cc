// Times the exact GPU reference on production shapes: the decode and compute kernels
// by CUDA events, the whole call (copies of inputs and of every ExactElement back) by the host
// clock. Prints a table and writes JSON: gpu_reference_bench [--json FILE] [--repeat N]
// [--only gemv|gemm].
#include <algorithm>
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
  std::string only;  // "gemv" or "gemm": that op's shapes alone
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE] [--repeat N] [--only gemv|gemm]\n", argv[0]);
      return 2;
    }
  }
  std::string why;
  if (!nvfp4::gpu_reference_available(&why)) {
    std::fprintf(stderr, "gpu_reference_bench: %s\n", why.c_str());
    return 2;
  }
  struct Case {
    nvfp4::Op op;
    int64_t m, n, k, l;
  };
  const Case cases[] = {
      {nvfp4::Op::gemv, 7168, 1, 16384, 1}, {nvfp4::Op::gemv, 4096, 1, 7168, 8},
      {nvfp4::Op::gemv, 7168, 1, 2048, 4},  {nvfp4::Op::gemv, 7169, 1, 16400, 3},
      {nvfp4::Op::gemm, 128, 7168, 16384, 1}, {nvfp4::Op::gemm, 4096, 4096, 4096, 1},
      {nvfp4::Op::gemm, 8192, 8192, 8192, 1},
  };
  const uint64_t seed = 7;
  std::printf("seed %llu, median of %d calls each\n", static_cast<unsigned long long>(seed), repeat);
  std::printf("%-5s %6s %6s %6s %3s %10s %11s %10s\n", "op", "m", "n", "k", "l", "decode ms", "compute ms",
              "total ms");
  nlohmann::json out = nlohmann::json::array();
  nvfp4::Rng rng(seed);
  for (const Case& c : cases) {
    if (!only.empty() && only != nvfp4::to_string(c.op)) continue;
    nvfp4::Problem p;
    p.op = c.op;
    p.m = c.m;
    p.n = c.n;
    p.k = c.k;
    p.l = c.l;
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
    std::printf("%-5s %6lld %6lld %6lld %3lld %10.3f %11.3f %10.1f\n", nvfp4::to_string(c.op),
                static_cast<long long>(c.m), static_cast<long long>(c.n), static_cast<long long>(c.k),
                static_cast<long long>(c.l), dec, comp, total);
    out.push_back({{"op", nvfp4::to_string(c.op)}, {"m", c.m}, {"n", c.n}, {"k", c.k}, {"l", c.l},
                   {"decode_ms", dec}, {"compute_ms", comp}, {"total_ms", total}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
