// nvfp4_gpu_bench: the fast NVFP4 kernels on the GPU against two yardsticks,
// measured in the same run: the byte floor (bytes of A, SFA, B, SFB and C over the device's own
// copy bandwidth) and cuBLAS FP16 (cublasGemmEx on FP16 copies of the dequantized data, made on
// the GPU). Before any timing it checks the kernels against the exact reference (small ragged
// problems in both scale layouts, and sampled outputs of every benchmark shape) and exits 1 on
// a mismatch. Timings are medians of many CUDA-event measurements, inputs rotated across enough
// buffer sets that L2 (60 MB on the H200) cannot hold them.
//
//   nvfp4_gpu_bench [--out FILE.json] [--iters N] [--seed S] [--only gemv|gemm|grouped] [--checks-only]
// grouped: grouped_gemm_tc against the floor and cuBLAS's grouped FP16 GEMM (cublasGemmGroupedBatchedEx).
// --checks-only stops after the small-problem checks (for compute-sanitizer runs);
// --no-small-checks skips them (for profiler runs: the first launches are then the benchmark's).
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/block_scaled_decode.h"
#include "kernels/registry.h"
#include "harness/process/kernel_call.h"
#include "reference/exact_gemm.h"
#include "reference/oracle.h"
#include "reference/problem.h"
#include "reference/scale_layout.h"

namespace {

using nlohmann::json;

#define CHECK_CUDA(expr)                                                                            \
  do {                                                                                              \
    const cudaError_t err_ = (expr);                                                                \
    if (err_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::exit(2);                                                                                 \
    }                                                                                               \
  } while (0)

#define CHECK_CUBLAS(expr)                                                                 \
  do {                                                                                     \
    const cublasStatus_t st_ = (expr);                                                     \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                    \
      std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #expr, st_); \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

// ---- random data (seeded, reproducible) --------------------------------------------------

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

void fill_values(std::vector<uint8_t>& v, SplitMix64& rng) {
  for (size_t i = 0; i < v.size(); i += 8) {
    const uint64_t r = rng.next();
    for (size_t j = 0; j < 8 && i + j < v.size(); ++j) v[i + j] = static_cast<uint8_t>(r >> (8 * j));
  }
}

// Scale bytes between 2^-4 and about 2^3 (random sign bit, ignored under ue4m3): no NaN, no
// zeros, so that timings run on data that looks like real data.
void fill_scales(std::vector<uint8_t>& v, SplitMix64& rng) {
  for (auto& x : v) {
    const uint64_t r = rng.next();
    x = static_cast<uint8_t>(0x18 + r % 0x38) | static_cast<uint8_t>(((r >> 8) & 1) << 7);
  }
}

// ---- a problem on the device ----------------------------------------------------------------

struct HostData {
  nvfp4::Problem p;  // linear scales, as the reference wants them
  std::vector<uint8_t> sfa_dev_layout, sfb_dev_layout;
};

HostData make_host(nvfp4::Op op, int64_t m, int64_t n, int64_t k, int64_t l, nvfp4::SfLayout layout,
                   float alpha, uint64_t seed, bool special_scales) {
  HostData h;
  nvfp4::Problem& p = h.p;
  p.op = op, p.m = m, p.n = n, p.k = k, p.l = l, p.sf_layout = layout, p.alpha = alpha;
  SplitMix64 rng{seed};
  p.a.resize(p.a_bytes()), p.b.resize(p.b_bytes()), p.sfa.resize(p.sfa_bytes()), p.sfb.resize(p.sfb_bytes());
  fill_values(p.a, rng), fill_values(p.b, rng), fill_scales(p.sfa, rng), fill_scales(p.sfb, rng);
  if (special_scales) {
    // Subnormal and zero scales, and one NaN scale in a block whose A values are all zero: the
    // NaN must still reach its outputs.
    for (size_t i = 0; i < p.sfa.size(); i += 7) p.sfa[i] = static_cast<uint8_t>(rng.next() % 8);
    for (size_t i = 3; i < p.sfb.size(); i += 11) p.sfb[i] = static_cast<uint8_t>(rng.next() % 8);
    if (m > 2) {
      const int64_t row = m / 2, s = p.kb() / 2;
      p.sfa[row * p.kb() + s] = 0x7F;
      for (int64_t x = 16 * s; x < std::min(k, 16 * s + 16); x += 2) p.a[(row * k + x) / 2] = 0;
    }
  }
  if (layout == nvfp4::SfLayout::permuted) {
    // Padding cells hold NaN: a kernel that lets them change C fails the check.
    h.sfa_dev_layout = nvfp4::sf_to_permuted(p.sfa.data(), m, p.kb(), l, 0x7F);
    h.sfb_dev_layout = nvfp4::sf_to_permuted(p.sfb.data(), n, p.kb(), l, 0x7F);
  } else {
    h.sfa_dev_layout = p.sfa, h.sfb_dev_layout = p.sfb;
  }
  return h;
}

struct DeviceSet {
  uint8_t *a = nullptr, *b = nullptr, *sfa = nullptr, *sfb = nullptr;
  uint16_t* c = nullptr;
};

template <class T>
T* device_copy(const std::vector<T>& v) {
  T* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, std::max<size_t>(1, v.size() * sizeof(T))));
  CHECK_CUDA(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

DeviceSet upload(const HostData& h) {
  DeviceSet d;
  d.a = device_copy(h.p.a), d.b = device_copy(h.p.b);
  d.sfa = device_copy(h.sfa_dev_layout), d.sfb = device_copy(h.sfb_dev_layout);
  CHECK_CUDA(cudaMalloc(&d.c, h.p.c_elems() * 2));
  return d;
}

void release(DeviceSet& d) {
  cudaFree(d.a), cudaFree(d.b), cudaFree(d.sfa), cudaFree(d.sfb), cudaFree(d.c);
  d = DeviceSet{};
}

nvfp4_problem abi_problem(const nvfp4::Problem& p, const DeviceSet& d, cudaStream_t stream) {
  return nvfp4::to_abi(p, d.a, d.b, d.sfa, d.sfb, d.c, stream);
}

// ---- correctness ------------------------------------------------------------------------
//
// Everything is enqueued on the bench's own non-blocking stream: it does not synchronise with
// the legacy default stream, so a plain cudaMemset (poison) could land after the kernel's
// writes. (It did, in the first runs: outputs looked unwritten.)

// Runs the kernel on a C poisoned with NaN (so an unwritten element fails) and judges every
// element against the exact reference under the kernel's policy.
bool check_small(const nvfp4::Kernel& kernel, const HostData& h, cudaStream_t stream, json& log) {
  DeviceSet d = upload(h);
  CHECK_CUDA(cudaMemsetAsync(d.c, 0xFF, h.p.c_elems() * 2, stream));
  const nvfp4_problem q = abi_problem(h.p, d, stream);
  const int rc = kernel.run(q);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaGetLastError());
  std::vector<uint16_t> c(h.p.c_elems());
  CHECK_CUDA(cudaMemcpy(c.data(), d.c, c.size() * 2, cudaMemcpyDeviceToHost));
  release(d);
  char shape[160];
  std::snprintf(shape, sizeof shape, "%s m=%lld n=%lld k=%lld l=%lld %s alpha=%g", nvfp4::to_string(h.p.op),
                static_cast<long long>(h.p.m), static_cast<long long>(h.p.n), static_cast<long long>(h.p.k),
                static_cast<long long>(h.p.l), nvfp4::to_string(h.p.sf_layout), h.p.alpha);
  if (rc != NVFP4_OK) {
    std::printf("FAIL %-10s %s: run returned %d\n", kernel.name().c_str(), shape, rc);
    log.push_back({{"kernel", kernel.name()}, {"shape", shape}, {"ok", false}, {"rc", rc}});
    return false;
  }
  const nvfp4::ExactResult ref = nvfp4::exact_gemm(h.p);
  const nvfp4::OracleSummary s = nvfp4::judge(h.p, ref, c.data(), nvfp4::Policy::for_flags(kernel.info->flags));
  const bool ok = !s.any_failure();
  std::printf("%s %-10s %s: %lld elements, %lld exact-regime, max %.3g ulp", ok ? "ok  " : "FAIL",
              kernel.name().c_str(), shape, static_cast<long long>(s.elements),
              static_cast<long long>(s.exact_regime), s.max_error_ulps);
  if (!ok)
    std::printf("; %lld failing, first (b=%lld,i=%lld,j=%lld) expected %04x got %04x", static_cast<long long>(s.failing),
                static_cast<long long>(s.first_b), static_cast<long long>(s.first_i),
                static_cast<long long>(s.first_j), s.first.expected_bits, s.first_actual);
  std::printf("\n");
  log.push_back({{"kernel", kernel.name()}, {"shape", shape}, {"ok", ok}, {"failing", s.failing},
                 {"elements", s.elements}});
  return ok;
}

// Judges sampled output elements of a big problem: each element depends on one row of A and one
// of B, so each is its own 1x1 problem for the exact reference.
bool check_sampled(const std::string& name, const nvfp4::Kernel& kernel, const HostData& h, const uint16_t* c,
                   int samples, uint64_t seed) {
  const nvfp4::Problem& p = h.p;
  SplitMix64 rng{seed};
  const int64_t kb = p.kb();
  int bad = 0;
  for (int s = 0; s < samples; ++s) {
    int64_t b = rng.next() % p.l, i = rng.next() % p.m, j = rng.next() % p.n;
    if (s == 0) b = i = j = 0;
    if (s == 1) b = p.l - 1, i = p.m - 1, j = p.n - 1;
    nvfp4::Problem one;
    one.op = nvfp4::Op::gemm, one.m = 1, one.n = 1, one.k = p.k, one.l = 1;
    one.sf_layout = nvfp4::SfLayout::linear, one.alpha = p.alpha;
    const int64_t rb = p.k / 2;
    one.a.assign(p.a.begin() + (b * p.m + i) * rb, p.a.begin() + (b * p.m + i + 1) * rb);
    one.b.assign(p.b.begin() + (b * p.n + j) * rb, p.b.begin() + (b * p.n + j + 1) * rb);
    one.sfa.assign(p.sfa.begin() + (b * p.m + i) * kb, p.sfa.begin() + (b * p.m + i + 1) * kb);
    one.sfb.assign(p.sfb.begin() + (b * p.n + j) * kb, p.sfb.begin() + (b * p.n + j + 1) * kb);
    const nvfp4::ExactResult ref = nvfp4::exact_gemm(one);
    const uint16_t actual = c[(b * p.m + i) * p.n + j];
    const nvfp4::ElementVerdict v =
        nvfp4::judge_element(ref.elems[0], p.alpha, actual, nvfp4::Policy::for_flags(kernel.info->flags));
    if (!v.ok) {
      if (bad < 5)
        std::printf("FAIL %s sampled (b=%lld,i=%lld,j=%lld): expected %04x got %04x (%.3g x bound)\n", name.c_str(),
                    static_cast<long long>(b), static_cast<long long>(i), static_cast<long long>(j),
                    v.expected_bits, actual, v.error_over_bound);
      ++bad;
    }
  }
  std::printf("%s %s: %d sampled outputs checked against the exact reference, %d bad\n", bad ? "FAIL" : "ok  ",
              name.c_str(), samples, bad);
  return bad == 0;
}

// ---- timing ---------------------------------------------------------------------------

struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;
  int iters = 0;
};

// Median of per-launch CUDA-event times; launch(set) must enqueue one run on `stream` using
// buffer set `set` (rotation keeps the inputs out of L2).
template <class Launch>
Timing time_it(Launch launch, int sets, int iters, cudaStream_t stream) {
  for (int w = 0; w < 3; ++w) launch(w % sets);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<cudaEvent_t> start(iters), stop(iters);
  for (int i = 0; i < iters; ++i) {
    CHECK_CUDA(cudaEventCreate(&start[i]));
    CHECK_CUDA(cudaEventCreate(&stop[i]));
  }
  for (int i = 0; i < iters; ++i) {
    CHECK_CUDA(cudaEventRecord(start[i], stream));
    launch(i % sets);
    CHECK_CUDA(cudaEventRecord(stop[i], stream));
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaGetLastError());
  std::vector<double> t(iters);
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start[i], stop[i]));
    t[i] = ms * 1000.0;
    cudaEventDestroy(start[i]), cudaEventDestroy(stop[i]);
  }
  std::sort(t.begin(), t.end());
  return {t[iters / 2], t.front(), t.back(), iters};
}

// Device-to-device copy bandwidth, counting bytes read plus bytes written.
double copy_bandwidth(cudaStream_t stream, int iters) {
  const size_t bytes = size_t{2} << 30;
  void *src = nullptr, *dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, bytes));
  CHECK_CUDA(cudaMalloc(&dst, bytes));
  CHECK_CUDA(cudaMemsetAsync(src, 0x5A, bytes, stream));
  const Timing t = time_it([&](int) { CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream)); },
                           1, iters, stream);
  cudaFree(src), cudaFree(dst);
  return 2.0 * bytes / (t.median_us * 1e-6);
}

// FP16 copies of A*sa (or B*sb) for cuBLAS: element (row, x) = E2M1 * E4M3, exact in FP16.
__global__ void dequantize_kernel(const uint8_t* values, const uint8_t* scales, uint32_t layout, int64_t rows,
                                  int64_t k, int64_t l, __half* out) {
  const int64_t kb = (k + 15) / 16, total = l * rows * k;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t x = e % k, row = (e / k) % rows, b = e / (k * rows);
    const float v = nvfp4::kern::e2m1_to_float(nvfp4::kern::e2m1_code(values + (b * rows + row) * (k / 2), x));
    const float s = nvfp4::kern::e4m3_to_float(scales[nvfp4::kern::scale_offset(layout, rows, kb, b, row, x / 16)], false);
    out[e] = __float2half_rn(v * s);
  }
}

struct Shape {
  nvfp4::Op op;
  int64_t m, n, k, l;
};

std::string shape_name(const Shape& s) {
  char buf[96];
  if (s.op == nvfp4::Op::gemv)
    std::snprintf(buf, sizeof buf, "gemv m=%lld k=%lld l=%lld", static_cast<long long>(s.m), static_cast<long long>(s.k),
                  static_cast<long long>(s.l));
  else
    std::snprintf(buf, sizeof buf, "gemm m=%lld n=%lld k=%lld l=%lld", static_cast<long long>(s.m),
                  static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(s.l));
  return buf;
}

// ---- grouped GEMM -----------------------------------------------------------------------
//
// grouped_gemm_tc (one launch for all experts) against the byte floor and cuBLAS's grouped FP16
// GEMM (cublasGemmGroupedBatchedEx, one GEMM per group, on FP16 copies of A*sa and B*sb made on
// the GPU from the same data), on MoE-like shapes: experts with uneven token counts, some none.
// Separate arrangement (each expert its own buffers), permuted scales, FP16 out for the check
// (sampled outputs of every group against the exact reference) and the timings, BF16 timed too.
struct GroupedShape {
  std::vector<int64_t> m;  // tokens per expert, 0 allowed
  int64_t n, k;
};

std::string grouped_name(const GroupedShape& s) {
  int64_t total = 0, empty = 0;
  for (int64_t m : s.m) total += m, empty += m == 0;
  char buf[128];
  std::snprintf(buf, sizeof buf, "grouped G=%zu sum_m=%lld (%lld empty) n=%lld k=%lld", s.m.size(),
                static_cast<long long>(total), static_cast<long long>(empty), static_cast<long long>(s.n),
                static_cast<long long>(s.k));
  return buf;
}

// Returns false when a check fails (the caller stops with exit 1).
bool bench_grouped(const nvfp4::Kernel& tc, cublasHandle_t cublas, cudaStream_t stream, double copy_bw, int iters,
                   uint64_t& seed, json& results) {
  SplitMix64 pick{seed ^ 0x6E0};
  auto tokens = [&](int experts, int64_t mean) {
    std::vector<int64_t> m(experts);
    for (int64_t& v : m) v = (pick.next() % 8 == 0) ? 0 : static_cast<int64_t>(pick.next() % (2 * mean + 1));
    return m;
  };
  const std::vector<GroupedShape> shapes = {
      {tokens(8, 512), 4096, 7168}, {tokens(32, 128), 2048, 7168}, {tokens(64, 64), 7168, 2048}, {tokens(256, 16), 2048, 7168}};
  for (const GroupedShape& shape : shapes) {
    const std::string name = grouped_name(shape);
    const size_t count = shape.m.size();
    std::vector<HostData> hosts;
    std::vector<DeviceSet> dev;
    std::vector<nvfp4_group> table;
    double bytes = 0, flops = 0;
    for (size_t g = 0; g < count; ++g) {
      // An empty expert still has its B (the weights); its A and C are empty.
      const int64_t m = std::max<int64_t>(shape.m[g], 1);
      hosts.push_back(make_host(nvfp4::Op::gemm, m, shape.n, shape.k, 1, nvfp4::SfLayout::permuted, 1.0f, ++seed, false));
      dev.push_back(upload(hosts.back()));
      const DeviceSet& d = dev.back();
      table.push_back({shape.m[g], shape.n, shape.k, d.a, d.b, d.sfa, d.sfb, shape.m[g] ? d.c : nullptr, 1.0f});
      if (shape.m[g] == 0) continue;
      const HostData& h = hosts.back();
      bytes += static_cast<double>(h.p.a.size() + h.sfa_dev_layout.size() + h.p.b.size() + h.sfb_dev_layout.size() +
                                   h.p.c_elems() * 2);
      flops += 2.0 * shape.m[g] * shape.n * shape.k;
    }
    nvfp4_group* table_dev = nullptr;
    CHECK_CUDA(cudaMalloc(&table_dev, sizeof(nvfp4_group) * count));
    CHECK_CUDA(cudaMemcpy(table_dev, table.data(), sizeof(nvfp4_group) * count, cudaMemcpyHostToDevice));
    nvfp4_problem p{};
    p.op = NVFP4_OP_GROUPED_GEMM;
    for (int64_t m : shape.m) p.m += m;
    p.n = shape.n, p.k = shape.k, p.l = 1;
    p.sf_layout = NVFP4_SF_PERMUTED;
    p.alpha = p.alpha2 = 1.0f;
    p.stream = stream;
    p.out_type = NVFP4_OUT_FP16;
    p.groups = static_cast<int64_t>(count);
    p.group = table.data();
    p.group_device = table_dev;
    const double floor_us = bytes / copy_bw * 1e6;
    std::printf("\n%s: %.1f MB moved at least, floor %.2f us\n", name.c_str(), bytes / 1e6, floor_us);

    // Correctness first: sampled outputs of every nonempty group.
    for (size_t g = 0; g < count; ++g)
      if (shape.m[g]) CHECK_CUDA(cudaMemsetAsync(dev[g].c, 0xFF, hosts[g].p.c_elems() * 2, stream));
    if (tc.run(p) != NVFP4_OK) {
      std::printf("FAIL %s: %s refused or failed\n", name.c_str(), tc.name().c_str());
      return false;
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (size_t g = 0; g < count; ++g) {
      if (!shape.m[g]) continue;
      std::vector<uint16_t> c(hosts[g].p.c_elems());
      CHECK_CUDA(cudaMemcpy(c.data(), dev[g].c, c.size() * 2, cudaMemcpyDeviceToHost));
      if (!check_sampled(tc.name() + " " + name + " group " + std::to_string(g), tc, hosts[g], c.data(), 8, seed ^ g))
        return false;
    }

    json entry = {{"shape", name}, {"groups", count}, {"m", shape.m}, {"n", shape.n}, {"k", shape.k},
                  {"bytes", bytes}, {"flops", flops}, {"floor_us", floor_us}, {"kernels", json::array()}};
    auto record = [&](const std::string& kname, const Timing& t) {
      entry["kernels"].push_back({{"name", kname}, {"median_us", t.median_us}, {"min_us", t.min_us},
                                  {"max_us", t.max_us}, {"iters", t.iters},
                                  {"gb_per_s", bytes / (t.median_us * 1e-6) / 1e9},
                                  {"tflop_per_s", flops / (t.median_us * 1e-6) / 1e12},
                                  {"over_floor", t.median_us / floor_us}});
      std::printf("  %-22s median %9.2f us (min %.2f, max %.2f)  %6.1f TFLOP/s  %.2fx floor\n", kname.c_str(),
                  t.median_us, t.min_us, t.max_us, flops / (t.median_us * 1e-6) / 1e12, t.median_us / floor_us);
    };
    // The experts' B alone exceed L2 (60 MB on the H200) at these shapes: one buffer set.
    const Timing t_fp16 = time_it([&](int) { if (tc.run(p) != NVFP4_OK) std::exit(1); }, 1, iters, stream);
    record(tc.name() + " fp16", t_fp16);
    nvfp4_problem pb = p;
    pb.out_type = NVFP4_OUT_BF16;  // BF16 words fit in the FP16 C buffers
    record(tc.name() + " bf16", time_it([&](int) { if (tc.run(pb) != NVFP4_OK) std::exit(1); }, 1, iters, stream));

    // cuBLAS grouped FP16 GEMM on FP16 copies, one group per expert with tokens. Row-major
    // C[m][n] = A[m][k] B[n][k]^T is column-major C^T = B^T' A: op(B) = T, op(A) = N.
    std::vector<__half*> a16, b16, c16;
    std::vector<int> ms, ns, ks, lda, ldb, ldc, sizes;
    std::vector<cublasOperation_t> ta, tb;
    std::vector<float> alpha, beta;
    for (size_t g = 0; g < count; ++g) {
      if (!shape.m[g]) continue;
      __half *a = nullptr, *b = nullptr, *c = nullptr;
      CHECK_CUDA(cudaMalloc(&a, 2 * shape.m[g] * shape.k));
      CHECK_CUDA(cudaMalloc(&b, 2 * shape.n * shape.k));
      CHECK_CUDA(cudaMalloc(&c, 2 * shape.m[g] * shape.n));
      dequantize_kernel<<<4096, 256, 0, stream>>>(dev[g].a, dev[g].sfa, NVFP4_SF_PERMUTED, shape.m[g], shape.k, 1, a);
      dequantize_kernel<<<4096, 256, 0, stream>>>(dev[g].b, dev[g].sfb, NVFP4_SF_PERMUTED, shape.n, shape.k, 1, b);
      CHECK_CUDA(cudaGetLastError());
      a16.push_back(a), b16.push_back(b), c16.push_back(c);
      ta.push_back(CUBLAS_OP_T), tb.push_back(CUBLAS_OP_N);
      ms.push_back(static_cast<int>(shape.n)), ns.push_back(static_cast<int>(shape.m[g])), ks.push_back(static_cast<int>(shape.k));
      lda.push_back(static_cast<int>(shape.k)), ldb.push_back(static_cast<int>(shape.k)), ldc.push_back(static_cast<int>(shape.n));
      alpha.push_back(1.0f), beta.push_back(0.0f), sizes.push_back(1);
    }
    const int used = static_cast<int>(a16.size());
    // The pointer arrays live in device memory; shapes, scalars and group sizes on the host.
    const void** dA = nullptr;
    const void** dB = nullptr;
    void** dC = nullptr;
    CHECK_CUDA(cudaMalloc(&dA, sizeof(void*) * used));
    CHECK_CUDA(cudaMalloc(&dB, sizeof(void*) * used));
    CHECK_CUDA(cudaMalloc(&dC, sizeof(void*) * used));
    CHECK_CUDA(cudaMemcpy(dA, b16.data(), sizeof(void*) * used, cudaMemcpyHostToDevice));  // op(A) of cuBLAS is our B
    CHECK_CUDA(cudaMemcpy(dB, a16.data(), sizeof(void*) * used, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dC, c16.data(), sizeof(void*) * used, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const Timing t_cublas = time_it(
        [&](int) {
          CHECK_CUBLAS(cublasGemmGroupedBatchedEx(cublas, ta.data(), tb.data(), ms.data(), ns.data(), ks.data(),
                                                  alpha.data(), dA, CUDA_R_16F, lda.data(), dB, CUDA_R_16F, ldb.data(),
                                                  beta.data(), dC, CUDA_R_16F, ldc.data(), used, sizes.data(),
                                                  CUBLAS_COMPUTE_32F));
        },
        1, iters, stream);
    record("cublas_grouped_fp16", t_cublas);
    entry["speedup_vs_cublas"] = t_cublas.median_us / t_fp16.median_us;
    results.push_back(entry);
    cudaFree(dA), cudaFree(dB), cudaFree(dC);
    for (int g = 0; g < used; ++g) cudaFree(a16[g]), cudaFree(b16[g]), cudaFree(c16[g]);
    cudaFree(table_dev);
    for (auto& d : dev) release(d);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path = "gpu_bench.json", only;
  bool checks_only = false, small_checks = true;
  int iters = 50;
  uint64_t seed = static_cast<uint64_t>(std::time(nullptr));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "nvfp4_gpu_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--out") out_path = value();
    else if (a == "--iters") iters = std::atoi(value().c_str());
    else if (a == "--seed") seed = std::strtoull(value().c_str(), nullptr, 0);
    else if (a == "--only") only = value();
    else if (a == "--checks-only") checks_only = true;
    else if (a == "--no-small-checks") small_checks = false;
    else {
      std::fprintf(stderr, "usage: nvfp4_gpu_bench [--out FILE.json] [--iters N] [--seed S] [--only gemv|gemm|grouped] [--checks-only] [--no-small-checks]\n");
      return 2;
    }
  }
  if (iters < 5) iters = 5;
  std::printf("nvfp4_gpu_bench seed %llu\n", static_cast<unsigned long long>(seed));

  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "nvfp4_gpu_bench: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %.1f MB, sm_%d%d\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6,
              prop.major, prop.minor);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t cublas;
  CHECK_CUBLAS(cublasCreate(&cublas));
  CHECK_CUBLAS(cublasSetStream(cublas, stream));

  const nvfp4::Registry registry = nvfp4::Registry::with_builtins();
  const nvfp4::Kernel* gemv_fast = registry.find("gemv_fast");
  const nvfp4::Kernel* gemm_tc = registry.find("gemm_tc");
  const nvfp4::Kernel* gemv_naive = registry.find("gemv_naive");
  if (!gemv_fast || !gemm_tc || !gemv_naive) {
    std::fprintf(stderr, "nvfp4_gpu_bench: gemv_fast, gemm_tc or gemv_naive is not built in\n");
    return 2;
  }

  json report;
  report["seed"] = seed;
  report["device"] = {{"name", prop.name}, {"sms", prop.multiProcessorCount}, {"l2_bytes", prop.l2CacheSize},
                      {"cc", prop.major * 10 + prop.minor}};
  report["iters"] = iters;
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  report["date"] = date;

  // 1. Correctness on small, ragged problems, both layouts, every path of both kernels.
  bool all_ok = true;
  json checks = json::array();
  {
    uint64_t s = seed;
    const nvfp4::SfLayout layouts[] = {nvfp4::SfLayout::linear, nvfp4::SfLayout::permuted};
    const int64_t gemv_shapes[][3] = {{1, 64, 1},     {5, 96, 2},     {130, 2048, 3}, {257, 1000, 1},
                                      {300, 16384, 1}, {64, 130, 2},  {200, 7168, 2}, {33, 2, 1},
                                      {129, 64 * 300, 1}, {4, 192, 5}, {2, 64, 300},
                                      {20000, 4096, 1}, {3000, 7168, 3}};
    const int64_t gemm_shapes[][4] = {{1, 1, 64, 1},   {17, 33, 96, 2},  {130, 200, 512, 1}, {128, 128, 64, 1},
                                      {129, 7, 1000, 1}, {256, 300, 2048, 1}, {3, 5, 2, 2},     {200, 129, 160, 1},
                                      {64, 520, 4096, 1}};
    for (const auto layout : layouts) {
      if (!small_checks) break;
      for (const auto& g : gemv_shapes)
        for (const float alpha : {1.0f, 0.75f}) {
          const HostData h = make_host(nvfp4::Op::gemv, g[0], 1, g[1], g[2], layout, alpha, ++s, alpha != 1.0f);
          all_ok &= check_small(*gemv_fast, h, stream, checks);
        }
      for (const auto& g : gemm_shapes)
        for (const float alpha : {1.0f, -0.3f}) {
          const HostData h = make_host(nvfp4::Op::gemm, g[0], g[1], g[2], g[3], layout, alpha, ++s, alpha != 1.0f);
          all_ok &= check_small(*gemm_tc, h, stream, checks);
        }
    }
  }
  report["small_checks"] = checks;
  if (!all_ok || checks_only) {
    if (!all_ok) std::printf("correctness check FAILED: no timings\n");
    std::ofstream(out_path) << report.dump(2) << "\n";
    return all_ok ? 0 : 1;
  }

  // 2. Copy bandwidth: the floor's denominator.
  const double copy_bw = copy_bandwidth(stream, 20);
  std::printf("copy bandwidth (read + write): %.3f TB/s\n", copy_bw / 1e12);
  report["copy_bandwidth_bytes_per_s"] = copy_bw;

  const std::vector<Shape> shapes = {
      {nvfp4::Op::gemv, 7168, 1, 16384, 1},   {nvfp4::Op::gemv, 4096, 1, 7168, 8},
      {nvfp4::Op::gemv, 7168, 1, 2048, 4},    {nvfp4::Op::gemm, 128, 7168, 16384, 1},
      {nvfp4::Op::gemm, 128, 4096, 7168, 1},  {nvfp4::Op::gemm, 128, 7168, 2048, 1},
      {nvfp4::Op::gemm, 4096, 4096, 4096, 1}};
  json results = json::array();
  struct Row {
    std::string shape, kernel;
    double us, gbs, tflops, over_floor, vs_cublas;
  };
  std::vector<Row> rows;
  for (const Shape& shape : shapes) {
    if (!only.empty() && only != nvfp4::to_string(shape.op)) continue;
    const bool gemv = shape.op == nvfp4::Op::gemv;
    const nvfp4::Kernel& fast = gemv ? *gemv_fast : *gemm_tc;
    HostData h = make_host(shape.op, shape.m, shape.n, shape.k, shape.l, nvfp4::SfLayout::permuted, 1.0f, ++seed, false);
    const double bytes = static_cast<double>(h.p.a.size() + h.sfa_dev_layout.size() + h.p.b.size() +
                                             h.sfb_dev_layout.size() + h.p.c_elems() * 2);
    const double flops = 2.0 * shape.m * shape.n * shape.k * shape.l;
    const double floor_us = bytes / copy_bw * 1e6;
    // Enough sets that the rotation spans three times L2.
    const int sets = static_cast<int>(std::clamp<double>(std::ceil(3.0 * prop.l2CacheSize / bytes), 1.0, 16.0));
    std::vector<DeviceSet> dev;
    dev.push_back(upload(h));
    for (int s = 1; s < sets; ++s) {
      DeviceSet d;
      CHECK_CUDA(cudaMalloc(&d.a, h.p.a.size()));
      CHECK_CUDA(cudaMalloc(&d.b, h.p.b.size()));
      CHECK_CUDA(cudaMalloc(&d.sfa, h.sfa_dev_layout.size()));
      CHECK_CUDA(cudaMalloc(&d.sfb, h.sfb_dev_layout.size()));
      CHECK_CUDA(cudaMalloc(&d.c, h.p.c_elems() * 2));
      CHECK_CUDA(cudaMemcpyAsync(d.a, dev[0].a, h.p.a.size(), cudaMemcpyDeviceToDevice, stream));
      CHECK_CUDA(cudaMemcpyAsync(d.b, dev[0].b, h.p.b.size(), cudaMemcpyDeviceToDevice, stream));
      CHECK_CUDA(cudaMemcpyAsync(d.sfa, dev[0].sfa, h.sfa_dev_layout.size(), cudaMemcpyDeviceToDevice, stream));
      CHECK_CUDA(cudaMemcpyAsync(d.sfb, dev[0].sfb, h.sfb_dev_layout.size(), cudaMemcpyDeviceToDevice, stream));
      dev.push_back(d);
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const std::string name = shape_name(shape);
    std::printf("\n%s: %.1f MB moved at least, floor %.2f us, %d buffer sets\n", name.c_str(), bytes / 1e6, floor_us, sets);

    // Correctness of the fast kernel on this very shape (sampled outputs, exact reference).
    CHECK_CUDA(cudaMemsetAsync(dev[0].c, 0xFF, h.p.c_elems() * 2, stream));
    if (fast.run(abi_problem(h.p, dev[0], stream)) != NVFP4_OK) {
      std::printf("FAIL %s: %s refused or failed\n", name.c_str(), fast.name().c_str());
      return 1;
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<uint16_t> c(h.p.c_elems());
    CHECK_CUDA(cudaMemcpy(c.data(), dev[0].c, c.size() * 2, cudaMemcpyDeviceToHost));
    if (!check_sampled(fast.name() + " " + name, fast, h, c.data(), 64, seed ^ 0x5EED)) {
      std::ofstream(out_path) << report.dump(2) << "\n";
      return 1;
    }

    json entry = {{"shape", name},       {"m", shape.m},    {"n", shape.n},        {"k", shape.k},
                  {"l", shape.l},        {"bytes", bytes},  {"flops", flops},      {"floor_us", floor_us},
                  {"buffer_sets", sets}, {"kernels", json::array()}};
    auto record = [&](const std::string& kname, const Timing& t) {
      const double gbs = bytes / (t.median_us * 1e-6) / 1e9, tflops = flops / (t.median_us * 1e-6) / 1e12;
      entry["kernels"].push_back({{"name", kname}, {"median_us", t.median_us}, {"min_us", t.min_us},
                                  {"max_us", t.max_us}, {"iters", t.iters}, {"gb_per_s", gbs},
                                  {"tflop_per_s", tflops}, {"over_floor", t.median_us / floor_us}});
      rows.push_back({name, kname, t.median_us, gbs, tflops, t.median_us / floor_us, 0});
      std::printf("  %-12s median %9.2f us (min %.2f, max %.2f)  %7.1f GB/s  %6.1f TFLOP/s  %.2fx floor\n",
                  kname.c_str(), t.median_us, t.min_us, t.max_us, gbs, tflops, t.median_us / floor_us);
    };
    auto run_kernel = [&](const nvfp4::Kernel& kern) {
      return [&, kp = &kern](int s) {
        if (kp->run(abi_problem(h.p, dev[s], stream)) != NVFP4_OK) {
          std::fprintf(stderr, "%s failed during timing\n", kp->name().c_str());
          std::exit(1);
        }
      };
    };
    const Timing t_fast = time_it(run_kernel(fast), sets, iters, stream);
    record(fast.name(), t_fast);
    if (gemv) record("gemv_naive", time_it(run_kernel(*gemv_naive), sets, std::max(5, iters / 5), stream));

    // cuBLAS FP16 on FP16 copies of A*sa and B*sb, made on the GPU from the same data.
    const double bytes16 = 2.0 * shape.l * (shape.m + shape.n) * shape.k;
    const int sets16 = static_cast<int>(std::clamp<double>(std::ceil(3.0 * prop.l2CacheSize / bytes16), 1.0, 8.0));
    std::vector<__half*> a16(sets16), b16(sets16);
    uint16_t* c16 = nullptr;
    CHECK_CUDA(cudaMalloc(&c16, h.p.c_elems() * 2));
    for (int s = 0; s < sets16; ++s) {
      const DeviceSet& d = dev[s % sets];
      CHECK_CUDA(cudaMalloc(&a16[s], 2 * shape.l * shape.m * shape.k));
      CHECK_CUDA(cudaMalloc(&b16[s], 2 * shape.l * shape.n * shape.k));
      dequantize_kernel<<<4096, 256, 0, stream>>>(d.a, d.sfa, NVFP4_SF_PERMUTED, shape.m, shape.k, shape.l, a16[s]);
      dequantize_kernel<<<4096, 256, 0, stream>>>(d.b, d.sfb, NVFP4_SF_PERMUTED, shape.n, shape.k, shape.l, b16[s]);
      CHECK_CUDA(cudaGetLastError());
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const float one = 1.0f, zero = 0.0f;
    // Row-major C[m][n] = A[m][k] B[n][k]^T is column-major C^T = B^T' A: op(B) = T, op(A) = N.
    const Timing t_cublas = time_it(
        [&](int s) {
          CHECK_CUBLAS(cublasGemmStridedBatchedEx(
              cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(shape.n), static_cast<int>(shape.m),
              static_cast<int>(shape.k), &one, b16[s], CUDA_R_16F, static_cast<int>(shape.k), shape.n * shape.k,
              a16[s], CUDA_R_16F, static_cast<int>(shape.k), shape.m * shape.k, &zero, c16, CUDA_R_16F,
              static_cast<int>(shape.n), shape.m * shape.n, static_cast<int>(shape.l), CUBLAS_COMPUTE_32F,
              CUBLAS_GEMM_DEFAULT));
        },
        sets16, iters, stream);
    record("cublas_fp16", t_cublas);
    // cuBLAS's result on the same data must agree with the fast kernel's within FP32 rounding.
    {
      std::vector<uint16_t> cb(h.p.c_elems());
      CHECK_CUDA(cudaMemcpy(cb.data(), c16, cb.size() * 2, cudaMemcpyDeviceToHost));
      int64_t far = 0;
      for (size_t e = 0; e < cb.size(); ++e) {
        const float x = __half2float(__ushort_as_half(c[e])), y = __half2float(__ushort_as_half(cb[e]));
        if (!(std::fabs(x - y) <= 1e-2f * std::fabs(y) + 1e-2f)) ++far;
      }
      std::printf("  cuBLAS vs %s on the same data: %lld of %zu outputs differ by more than 1%%\n",
                  fast.name().c_str(), static_cast<long long>(far), cb.size());
      entry["cublas_disagreements"] = far;
    }
    entry["speedup_vs_cublas"] = t_cublas.median_us / t_fast.median_us;
    for (auto& r : rows)
      if (r.shape == name) r.vs_cublas = t_cublas.median_us / r.us;
    results.push_back(entry);
    for (int s = 0; s < sets16; ++s) cudaFree(a16[s]), cudaFree(b16[s]);
    cudaFree(c16);
    for (auto& d : dev) release(d);
  }
  report["results"] = results;
  if (only.empty() || only == "grouped") {
    const nvfp4::Kernel* grouped_tc = registry.find("grouped_gemm_tc");
    if (!grouped_tc) {
      std::fprintf(stderr, "nvfp4_gpu_bench: grouped_gemm_tc is not built in\n");
      return 2;
    }
    json grouped = json::array();
    const bool ok = bench_grouped(*grouped_tc, cublas, stream, copy_bw, iters, seed, grouped);
    report["grouped_results"] = grouped;
    if (!ok) {
      std::ofstream(out_path) << report.dump(2) << "\n";
      return 1;
    }
  }
  std::ofstream(out_path) << report.dump(2) << "\n";

  std::printf("\n%-36s %-12s %10s %9s %8s %9s %10s\n", "shape", "kernel", "median us", "GB/s", "TFLOP/s",
              "x floor", "cuBLAS/x");
  for (const Row& r : rows)
    std::printf("%-36s %-12s %10.2f %9.1f %8.1f %9.2f %10.2f\n", r.shape.c_str(), r.kernel.c_str(), r.us, r.gbs,
                r.tflops, r.over_floor, r.vs_cublas);
  std::printf("JSON: %s\n", out_path.c_str());
  cublasDestroy(cublas);
  cudaStreamDestroy(stream);
  return 0;
}
