// The exact block-scaled (MX) reference on the GPU: every output element's facts (r and S in the
// Kulisch accumulator, t, g, NaN and Inf flags) as exact_mx computes them, bit for bit. A thread
// block owns a TM x TN tile of outputs; for each chunk of 32 elements along k (one MX block, two
// NVFP4 blocks) its threads decode the tile's rows of A and B into shared memory as exact integers
// (mx_element_int) with their scales (mx_scale), and each thread adds its element's segments
// with mx_add_segments: reference/mx_accumulate.h's code, the same that the CPU tests check
// against exact_mx. The words are rounded on the host from the facts by exact_mx_result.
#include <cuda_runtime.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_reference/device_array.h"
#include "gpu_reference/exact_gemm_gpu.h"
#include "reference/exact_mx.h"
#include "reference/mx_accumulate.h"

namespace nvfp4 {
namespace {

using gpu::check_cuda;
using gpu::DeviceArray;
using gpu::upload;

constexpr int kChunk = kMxChunk, kChunkScales = kMxChunkScales;

// One operand on the device: data as SPEC section 2 lays it out, linear scales.
struct OperandView {
  const uint8_t* data;
  const uint8_t* scales;
  BlockFormat format;
  int64_t rows;       // per batch
  int64_t row_bytes;  // bytes of one row of k elements
  int64_t kb;         // scales per row
};

// Rows [row0, row0 + kRows) of batch `batch` of an operand for the chunk at c0, as
// mx_chunk_element and mx_chunk_scale give them (zeros and placeholders past the operand's rows).
template <int kRows, int kThreads>
__device__ __forceinline__ void load_chunk(const OperandView& op, int64_t batch, int64_t row0, int64_t c0, int64_t k,
                                           ScaleSemantics semantics, int64_t (*vals)[kChunk + 1],
                                           ScaleValue (*sc)[kChunkScales]) {
  for (int idx = threadIdx.x; idx < kRows * kChunk; idx += kThreads) {
    const int r = idx / kChunk, x = idx % kChunk;
    const int64_t row = batch * op.rows + row0 + r;
    vals[r][x] = row0 + r < op.rows ? mx_chunk_element(op.format, op.data + row * op.row_bytes, c0, x, k) : 0;
  }
  for (int idx = threadIdx.x; idx < kRows * kChunkScales; idx += kThreads) {
    const int r = idx / kChunkScales, s = idx % kChunkScales;
    const int64_t row = batch * op.rows + row0 + r;
    sc[r][s] = row0 + r < op.rows ? mx_chunk_scale(op.format, op.scales + row * op.kb, op.kb, c0, s, semantics)
                                  : ScaleValue{false, 1, 1, 0};
  }
}

// A TM x TN tile of outputs per thread block, one output per thread; the grid's x runs over the
// tiles of a batch (m tiles times n tiles), its y over batches. Rows are padded by one element so
// that the threads of a warp reading B's rows hit different banks. Two blocks per SM: ptxas then
// keeps the 16 x 16 tile's threads at 126 registers, still without spills (172 when free), and an
// SM holds 16 warps instead of 8.
template <int TM, int TN>
__global__ void __launch_bounds__(TM * TN, 2) mx_exact_tiles(OperandView a, OperandView b, int64_t k,
                                                          ScaleSemantics semantics, int64_t n_tiles,
                                                          MxElement* __restrict__ out) {
  constexpr int kThreads = TM * TN;
  __shared__ int64_t av[TM][kChunk + 1];
  __shared__ int64_t bv[TN][kChunk + 1];
  __shared__ ScaleValue as[TM][kChunkScales];
  __shared__ ScaleValue bs[TN][kChunkScales];
  const int ty = threadIdx.x / TN, tx = threadIdx.x % TN;
  const int64_t batch = blockIdx.y;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) / n_tiles) * TM;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) % n_tiles) * TN;
  const int64_t i = row0 + ty, j = col0 + tx;
  const bool live = i < a.rows && j < b.rows;
  MxElement e;
  for (int64_t c0 = 0; c0 < k; c0 += kChunk) {
    load_chunk<TM, kThreads>(a, batch, row0, c0, k, semantics, av, as);
    load_chunk<TN, kThreads>(b, batch, col0, c0, k, semantics, bv, bs);
    __syncthreads();
    if (live) mx_add_segments(e, a.format, av[ty], as[ty], b.format, bv[tx], bs[tx], c0, c0 + kChunk, k);
    __syncthreads();  // before the next chunk overwrites the tile
  }
  if (live) {
    mx_finish(e);
    out[(batch * a.rows + i) * b.rows + j] = e;
  }
}

OperandView view(const MxOperand& op, const DeviceArray<uint8_t>& data, const DeviceArray<uint8_t>& scales) {
  return OperandView{data.ptr, scales.ptr, op.format, op.rows, operand_row_bytes(op.format, op.k), op.kb()};
}

}  // namespace

std::vector<MxElement> exact_mx_gpu(const MxProblem& p, GpuReferenceTiming* timing) {
  const auto start = std::chrono::steady_clock::now();
  validate(p);
  gpu::Stream stream;
  DeviceArray<uint8_t> d_a(p.a.data.size(), stream.s), d_b(p.b.data.size(), stream.s), d_sfa(p.a.scales.size(), stream.s),
      d_sfb(p.b.scales.size(), stream.s);
  upload(d_a, p.a.data, stream.s);
  upload(d_b, p.b.data, stream.s);
  upload(d_sfa, p.a.scales, stream.s);
  upload(d_sfb, p.b.scales, stream.s);
  const int64_t count = p.l * p.m * p.n;
  DeviceArray<MxElement> d_out(static_cast<size_t>(count), stream.s);

  cudaEvent_t events[2];
  for (cudaEvent_t& e : events) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  struct EventGuard {
    cudaEvent_t* e;
    ~EventGuard() {
      for (int x = 0; x < 2; ++x) cudaEventDestroy(e[x]);
    }
  } event_guard{events};
  check_cuda(cudaEventRecord(events[0], stream.s), "cudaEventRecord");
  const OperandView a = view(p.a, d_a, d_sfa), b = view(p.b, d_b, d_sfb);
  auto launch = [&](auto kernel, int tm, int tn) {
    const int64_t m_tiles = (p.m + tm - 1) / tm, n_tiles = (p.n + tn - 1) / tn;
    if (m_tiles * n_tiles > 0x7FFFFFFF || p.l > 65535)
      throw std::invalid_argument("GPU reference: the MX problem is too large for one launch");
    const dim3 grid(static_cast<unsigned>(m_tiles * n_tiles), static_cast<unsigned>(p.l));
    kernel<<<grid, tm * tn, 0, stream.s>>>(a, b, p.k, p.semantics, n_tiles, d_out.ptr);
    check_cuda(cudaGetLastError(), "mx_exact_tiles launch");
  };
  // A GEMV's one column would leave 15 of 16 threads of a square tile idle: a column of 128 rows.
  if (p.n == 1) launch(mx_exact_tiles<128, 1>, 128, 1);
  else launch(mx_exact_tiles<16, 16>, 16, 16);
  check_cuda(cudaEventRecord(events[1], stream.s), "cudaEventRecord");
  std::vector<MxElement> out(static_cast<size_t>(count));
  check_cuda(cudaMemcpyAsync(out.data(), d_out.ptr, out.size() * sizeof(MxElement), cudaMemcpyDeviceToHost, stream.s),
             "copy elements back");
  check_cuda(cudaStreamSynchronize(stream.s), "mx_exact_tiles");
  if (timing) {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, events[0], events[1]), "cudaEventElapsedTime");
    timing->decode_ms = 0;  // decoding happens as the tiles load
    timing->compute_ms = ms;
    timing->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  return out;
}

}  // namespace nvfp4
