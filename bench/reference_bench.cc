// Speed of the exact CPU reference (exact_gemm), GEMV and GEMM, in multiply-adds per second per
// core (the target is at least 1e9). Data are uniform random codes and scales
// from a fixed seed; the work does not depend on the values.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <ctime>
#include <random>
#include <vector>

#include "reference/exact_gemm.h"
#include "reference/oracle.h"
#include "reference/scale_layout.h"

namespace {

nvfp4::Problem random_problem(nvfp4::Op op, int64_t m, int64_t n, int64_t k) {
  nvfp4::Problem p;
  p.op = op;
  p.m = m;
  p.n = n;
  p.k = k;
  p.l = 1;
  std::mt19937_64 rng(12345);
  auto fill = [&](std::vector<uint8_t>& v, int64_t bytes, bool scale) {
    v.resize(static_cast<size_t>(bytes));
    // Scales avoid NaN (0x7F/0xFF); values use every code.
    for (auto& x : v) x = scale ? static_cast<uint8_t>(0x20 + rng() % 0x40) : static_cast<uint8_t>(rng());
  };
  fill(p.a, p.a_bytes(), false);
  fill(p.b, p.b_bytes(), false);
  fill(p.sfa, p.sfa_bytes(), true);
  fill(p.sfb, p.sfb_bytes(), true);
  if (op == nvfp4::Op::dual_gemm) {
    fill(p.b2, p.b_bytes(), false);
    fill(p.sfb2, p.sfb_bytes(), true);
    p.alpha2 = 0.75f;
  }
  return p;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Args: m, n, k, threads.
void BM_ExactReference(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const nvfp4::Problem p = random_problem(n == 1 ? nvfp4::Op::gemv : nvfp4::Op::gemm, m, n, k);
  omp_set_num_threads(threads);
  double cpu_seconds = 0;  // all threads of the process, spin-waits included
  for (auto _ : state) {
    const double before = process_cpu_seconds();
    nvfp4::ExactResult r = nvfp4::exact_gemm(p);
    benchmark::DoNotOptimize(r.c.data());
    cpu_seconds += process_cpu_seconds() - before;
  }
  const double mads = static_cast<double>(m) * n * k;
  // Wall-clock rates: what a caller waits for.
  state.counters["madds_per_s"] = benchmark::Counter(mads, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["madds_per_s_per_core"] =
      benchmark::Counter(mads / threads, benchmark::Counter::kIsIterationInvariantRate);
  // Per CPU-second of the threads that did the work: the per-core figure that stays meaningful
  // on a machine shared with other jobs (wall time there measures the neighbours too).
  state.counters["madds_per_cpu_s"] = mads * static_cast<double>(state.iterations()) / cpu_seconds;
}

BENCHMARK(BM_ExactReference)
    ->ArgNames({"m", "n", "k", "threads"})
    ->Args({4096, 1, 4096, 1})   // GEMV
    ->Args({4096, 1, 4096, 2})
    ->Args({256, 256, 1024, 1})  // GEMM
    ->Args({256, 256, 1024, 2})
    ->Args({7168, 1, 16384, 1})  // a large GEMV shape of the GPU MODE NVFP4 problems
    ->Args({128, 128, 64, 1})    // small k: padding of the last chunk dominates
    ->Args({256, 256, 16, 1})    // one block a row: the per-element work around it dominates
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// A dual GEMM's reference, one thread: G's and U's exact sums, then silu(G) * U in long double and
// its rounding for every output. Small k: the per-output silu dominates; k = 256: the sums.
void BM_DualReference(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const nvfp4::Problem p = random_problem(nvfp4::Op::dual_gemm, m, n, k);
  omp_set_num_threads(1);
  for (auto _ : state) {
    nvfp4::ExactResult r = nvfp4::exact_gemm(p);
    benchmark::DoNotOptimize(r.c.data());
  }
  state.counters["outputs_per_s"] =
      benchmark::Counter(static_cast<double>(m * n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DualReference)
    ->ArgNames({"m", "n", "k"})
    ->Args({256, 256, 16})
    ->Args({128, 128, 256})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The oracle on every output of a GEMM (fp32 policy, outputs equal to the reference, alpha not
// a power of two so every element takes the rounding-regime path): elements judged per second.
void BM_OracleJudge(benchmark::State& state) {
  nvfp4::Problem p = random_problem(nvfp4::Op::gemm, 512, 256, 64);
  p.alpha = 0.3f;
  const nvfp4::ExactResult ref = nvfp4::exact_gemm(p);
  const nvfp4::Policy policy = nvfp4::Policy::parse("fp32");
  for (auto _ : state) {
    const nvfp4::OracleSummary s = nvfp4::judge(p, ref, ref.c.data(), policy);
    benchmark::DoNotOptimize(s.failing);
  }
  state.counters["elements_per_s"] =
      benchmark::Counter(static_cast<double>(p.c_elems()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_OracleJudge)->Unit(benchmark::kMillisecond)->UseRealTime();

// The scales laid out in the permuted (128x4 tile) layout, as the kernel's process does
// for every call: a medium GEMV's A has 1024 rows of 256 scale blocks (256 KiB).
void BM_ScaleLayout(benchmark::State& state) {
  const int64_t rows = state.range(0), kb = state.range(1);
  std::vector<uint8_t> linear(static_cast<size_t>(rows * kb));
  std::mt19937 rng(7);
  for (auto& x : linear) x = static_cast<uint8_t>(rng());
  for (auto _ : state) {
    const std::vector<uint8_t> permuted = nvfp4::sf_to_permuted(linear.data(), rows, kb, 1, 0x7F);
    benchmark::DoNotOptimize(permuted.data());
  }
}
BENCHMARK(BM_ScaleLayout)
    ->ArgNames({"rows", "kb"})
    ->Args({1024, 256})
    ->Args({7168, 1024})
    ->Args({129, 13})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
