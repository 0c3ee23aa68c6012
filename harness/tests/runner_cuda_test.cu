// The runner's checks on CUDA kernels: an honest one passes, and so does one that synchronizes its
// stream inside the call; ones that use another stream, write out of bounds, leave outputs
// unwritten, modify inputs, cache by pointer or refuse supported shapes are each caught; and the
// built-in naive CUDA kernels pass on every data distribution.
// Without a CUDA device every test is skipped with the reason.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "harness/draw/generators.h"
#include "harness/process/device_buffers.h"
#include "harness/tests/check_in_process.h"
#include "harness/tests/scratch_dir.h"
#include "kernels/registry.h"
#include "reference/formats.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

constexpr uint32_t kBothOps = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);

enum Bug { kHonest, kLegacyStream, kOwnStream, kWritePastEnd, kUnwritten, kModifiesInput, kStaleCache,
           kRefusesSupported, kScribblesInput, kWritesBeforeInput, kLateOwnStream, kSyncsItsStream, kCount };

const nvfp4_kernel_info kInfos[kCount] = {
    {NVFP4_ABI_VERSION, "honest_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "legacy_stream_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "own_stream_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "write_past_end_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "unwritten_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "modifies_input_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "stale_cache_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "refuses_supported_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "scribbles_input_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "writes_before_input_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "late_own_stream_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "syncs_its_stream_cuda", NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
};

__device__ float e4m3_float(uint8_t byte) {
  const ScaleValue v = e4m3_decode(byte, ScaleSemantics::ue4m3);
  return v.nan ? __int_as_float(0x7fc00000) : ldexpf(static_cast<float>(v.sig), v.exp);
}

__device__ int64_t sf_offset(const nvfp4_problem& p, int64_t rows, int64_t b, int64_t r, int64_t s) {
  const int64_t kb = (p.k + 15) / 16;
  return p.sf_layout == NVFP4_SF_PERMUTED ? sf_permuted_offset(rows, kb, b, r, s) : sf_linear_offset(rows, kb, b, r, s);
}

// One thread per output element, FP32 accumulation; `skip_last` leaves each batch's last element.
__global__ void gemm_per_element(nvfp4_problem p, bool skip_last, bool write_past_end) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t elems = p.l * p.m * p.n;
  if (write_past_end && e == 0) p.c[elems] = 0x3C00;
  if (e >= elems) return;
  const int64_t b = e / (p.m * p.n), i = (e / p.n) % p.m, j = e % p.n;
  if (skip_last && i == p.m - 1 && j == p.n - 1) return;
  const uint8_t* arow = p.a + (b * p.m + i) * (p.k / 2);
  const uint8_t* brow = p.b + (b * p.n + j) * (p.k / 2);
  float acc = 0;
  for (int64_t x = 0; x < p.k; ++x) {
    const float a = 0.5f * e2m1_twice(e2m1_nibble(arow, x)), bv = 0.5f * e2m1_twice(e2m1_nibble(brow, x));
    acc += a * e4m3_float(p.sfa[sf_offset(p, p.m, b, i, x / 16)]) * bv * e4m3_float(p.sfb[sf_offset(p, p.n, b, j, x / 16)]);
  }
  p.c[e] = __half_as_ushort(__float2half_rn(p.alpha * acc));
}

__global__ void flip_first_byte(uint8_t* a) { a[0] ^= 0x11; }
// Two bytes in the middle of SFA (restored by nobody), or one byte of the guard before A.
__global__ void flip_middle_scales(uint8_t* sfa, int64_t at) {
  sfa[at] ^= 0x01;
  sfa[at + 2] ^= 0x40;
}
__global__ void flip_before_a(uint8_t* a) { a[-5] ^= 0x22; }

bool fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  return ((info.ops >> p->op) & 1u) && ((info.sf_layouts >> p->sf_layout) & 1u);
}

int run_test_kernel(int index, const nvfp4_problem* p) {
  static std::map<std::tuple<const uint8_t*, int64_t, int64_t, int64_t, int64_t>, uint16_t*> cache;
  static cudaStream_t own = nullptr;
  if (!fits(kInfos[index], p)) return NVFP4_UNSUPPORTED;
  if (index == kRefusesSupported && p->m > 3) return NVFP4_UNSUPPORTED;
  const int64_t elems = p->l * p->m * p->n;
  const unsigned blocks = static_cast<unsigned>((elems + 127) / 128);
  cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  if (index == kLegacyStream) stream = 0;
  if (index == kOwnStream) {
    if (!own) cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
    stream = own;
  }
  if (index == kLateOwnStream) {
    // From its third call on, computes on a stream of its own before returning, reading whatever
    // the inputs hold when it is called, and writes C ordered after problem.stream (so C is
    // neither overwritten by the poison nor written late): a case's stale call then gives run 1's
    // output, as a cache by pointer would.
    static int calls = 0;
    if (++calls >= 3) {
      if (!own) cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
      uint16_t* scratch = nullptr;
      cudaMalloc(&scratch, elems * 2 + 2);
      nvfp4_problem q = *p;
      q.c = scratch;
      gemm_per_element<<<blocks, 128, 0, own>>>(q, false, false);
      cudaStreamSynchronize(own);
      cudaEvent_t inputs_in = nullptr, written = nullptr;
      cudaEventCreateWithFlags(&inputs_in, cudaEventDisableTiming);
      cudaEventCreateWithFlags(&written, cudaEventDisableTiming);
      cudaEventRecord(inputs_in, stream);
      cudaStreamWaitEvent(own, inputs_in, 0);
      cudaMemcpyAsync(p->c, scratch, elems * 2, cudaMemcpyDeviceToDevice, own);
      cudaEventRecord(written, own);
      cudaStreamWaitEvent(stream, written, 0);
      cudaFreeAsync(scratch, own);
      cudaEventDestroy(inputs_in);
      cudaEventDestroy(written);
      return cudaGetLastError() == cudaSuccess ? NVFP4_OK : NVFP4_ERROR;
    }
  }
  if (index == kStaleCache) {
    const auto key = std::make_tuple(p->a, p->m, p->n, p->k, p->l);
    auto hit = cache.find(key);
    if (hit != cache.end()) {
      cudaMemcpyAsync(p->c, hit->second, elems * 2, cudaMemcpyDeviceToDevice, stream);
      return cudaGetLastError() == cudaSuccess ? NVFP4_OK : NVFP4_ERROR;
    }
    gemm_per_element<<<blocks, 128, 0, stream>>>(*p, false, false);
    uint16_t* saved = nullptr;
    cudaMalloc(&saved, elems * 2);
    cudaMemcpyAsync(saved, p->c, elems * 2, cudaMemcpyDeviceToDevice, stream);
    cache[key] = saved;
    return cudaGetLastError() == cudaSuccess ? NVFP4_OK : NVFP4_ERROR;
  }
  gemm_per_element<<<blocks, 128, 0, stream>>>(*p, index == kUnwritten, index == kWritePastEnd);
  // Waits for its own work before returning, as a kernel that reads a result back does: the
  // stream is held until the call returns, so only the hold's limit lets this wait end.
  if (index == kSyncsItsStream && cudaStreamSynchronize(stream) != cudaSuccess) return NVFP4_ERROR;
  if (index == kModifiesInput) flip_first_byte<<<1, 1, 0, stream>>>(const_cast<uint8_t*>(p->a));
  if (index == kScribblesInput)
    flip_middle_scales<<<1, 1, 0, stream>>>(const_cast<uint8_t*>(p->sfa), p->l * p->m * ((p->k + 15) / 16) / 2 + 1);
  if (index == kWritesBeforeInput) flip_before_a<<<1, 1, 0, stream>>>(const_cast<uint8_t*>(p->a));
  return cudaGetLastError() == cudaSuccess ? NVFP4_OK : NVFP4_ERROR;
}

int count_test_kernels() { return kCount; }
const nvfp4_kernel_info* get_test_kernel(int index) { return index >= 0 && index < kCount ? &kInfos[index] : nullptr; }

std::string no_device_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return std::string("no CUDA device: cudaGetDeviceCount gave ") + cudaGetErrorName(e);
  if (count == 0) return "no CUDA device on this machine";
  return "";
}

class CudaRunner : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = no_device_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    // Loaded now rather than at their first launch inside a call, which would wait for the
    // runner's hold on its stream (a whole 30 s hold in the stream test below).
    cudaFuncAttributes attributes{};
    for (const void* f :
         {reinterpret_cast<const void*>(gemm_per_element), reinterpret_cast<const void*>(flip_first_byte),
          reinterpret_cast<const void*>(flip_middle_scales), reinterpret_cast<const void*>(flip_before_a)})
      ASSERT_EQ(cudaFuncGetAttributes(&attributes, f), cudaSuccess);
  }
  static Registry& registry() {
    static Registry* r = [] {
      auto* reg = new Registry();
      reg->add_provider(count_test_kernels, get_test_kernel, run_test_kernel, "harness/tests/runner_cuda_test.cu");
      return reg;
    }();
    return *r;
  }
  static Problem problem(uint64_t seed) {
    Problem p;
    p.op = Op::gemm;
    p.m = 131;  // a tail tile of the permuted layout, and padding in it
    p.n = 7;
    p.k = 80;
    p.l = 2;
    Rng rng(seed);
    std::printf("problem gemm 131x7x80x2 permuted from seed %lu\n", (unsigned long)seed);
    fill_data(rng, DataSpec{}, p);
    return p;
  }
  // Inputs large enough to keep a device copy (A 2 MiB, SFA 256 KiB), so they are rewritten and
  // compared on the device.
  static Problem large_problem(uint64_t seed, SfLayout layout) {
    Problem p;
    p.op = Op::gemm;
    p.m = 2048;
    p.n = 3;
    p.k = 1024;
    p.l = 2;
    p.sf_layout = layout;
    Rng rng(seed);
    std::printf("problem gemm 2048x3x1024x2 %s from seed %lu\n", layout == SfLayout::permuted ? "permuted" : "linear",
                (unsigned long)seed);
    fill_data(rng, DataSpec{}, p);
    return p;
  }
  static CaseOptions options() {
    CaseOptions o;
    o.case_dir = test::scratch_dir("runner-cuda-test").string();  // removed when every test passed
    o.stale_seed = 31;
    return o;
  }
  static CaseOutcome check(const std::string& name) { return check(name, problem(2026)); }
  static CaseOutcome check(const std::string& name, const Problem& p) {
    const Kernel* k = registry().find(name);
    EXPECT_NE(k, nullptr) << name;
    const CaseOutcome r = check_in_process(*k, p, options());
    std::printf("%s: %s %s\n", name.c_str(), check_of(r).c_str(), message_of(r).c_str());
    return r;
  }
  // With the runner's stream held for as long as each call lasts (at most 4 ms otherwise): work
  // on another stream then surely runs before the uploads, however late its stream starts.
  static CaseOutcome check_stream_held(const std::string& name) {
    setenv("NVFP4_STREAM_GATE_MS", "30000", 1);
    const CaseOutcome r = check(name);
    unsetenv("NVFP4_STREAM_GATE_MS");
    return r;
  }
};

TEST_F(CudaRunner, HonestKernelPasses) {
  const CaseOutcome r = check("honest_cuda");
  EXPECT_EQ(r.verdict, CaseOutcome::Verdict::pass) << check_of(r) << ": " << message_of(r);
}

// A kernel that synchronizes the stream it was handed inside the call waits for the runner's hold
// on it, which lapses after its limit (4 ms): the call ends, in stream order, and passes. A hold
// that never lapsed would end it as a hang at the case's timeout.
TEST_F(CudaRunner, KernelThatSynchronizesItsStreamPasses) {
  const auto start = std::chrono::steady_clock::now();
  const CaseOutcome r = check("syncs_its_stream_cuda");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.verdict, CaseOutcome::Verdict::pass) << check_of(r) << ": " << message_of(r);
  EXPECT_LT(seconds, 20.0) << "each of the case's calls should wait 4 ms for the hold, not seconds";
}

// Work on another stream runs while the runner's stream is still held before its uploads: it
// reads stale inputs and its output is overwritten by the poison, or lands after the runner's
// stream is done. Either way a check fires.
TEST_F(CudaRunner, LegacyStreamKernelFails) {
  const CaseOutcome r = check("legacy_stream_cuda");
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  const std::set<std::string> expected = {"stream", "unwritten-output", "oracle", "nan-padding"};
  EXPECT_TRUE(expected.count(check_of(r))) << check_of(r);
}

TEST_F(CudaRunner, OwnStreamKernelFails) {
  const CaseOutcome r = check("own_stream_cuda");
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  const std::set<std::string> expected = {"stream", "unwritten-output", "oracle", "nan-padding"};
  EXPECT_TRUE(expected.count(check_of(r))) << check_of(r);
}

// With the runner's stream held for the whole call, the kernel's own stream runs before the
// uploads, and C's poison then overwrites what it wrote: C looks unwritten however long one waits.
// The verdict still names the stream (the output is right with the inputs complete first), as it
// does when the kernel's work lands after the runner's stream is done.
TEST_F(CudaRunner, OwnStreamWorkOverwrittenByThePoisonIsNamedByItsStream) {
  const CaseOutcome r = check_stream_held("own_stream_cuda");
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "stream") << message_of(r);
  EXPECT_NE(message_of(r).find("stream other than problem.stream"), std::string::npos) << message_of(r);
}

TEST_F(CudaRunner, OutOfBoundsWriteHitsTheGuard) {
  const CaseOutcome r = check("write_past_end_cuda");
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "guard") << message_of(r);
}

TEST_F(CudaRunner, UnwrittenOutputIsSeen) {
  const CaseOutcome r = check("unwritten_cuda");
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "unwritten-output") << message_of(r);
}

TEST_F(CudaRunner, ModifiedInputIsSeen) {
  const CaseOutcome r = check("modifies_input_cuda");
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "inputs-modified") << message_of(r);
}

// Large inputs are rewritten from their device copies for the second call and compared there:
// an honest kernel passes in both layouts (the permuted scales, laid out afresh for each call
// with that call's padding, are uploaded), and a change or a write before an input is found with
// its place and bytes, as a fetch would find it.
TEST_F(CudaRunner, LargeInputsPassWithDeviceCopies) {
  for (SfLayout layout : {SfLayout::linear, SfLayout::permuted}) {
    const CaseOutcome r = check("honest_cuda", large_problem(77, layout));
    EXPECT_EQ(r.verdict, CaseOutcome::Verdict::pass) << check_of(r) << ": " << message_of(r);
  }
}

TEST_F(CudaRunner, LargeModifiedInputIsSeenOnTheDevice) {
  for (SfLayout layout : {SfLayout::linear, SfLayout::permuted}) {
    const Problem p = large_problem(78, layout);
    CaseOutcome r = check("modifies_input_cuda", p);
    ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
    EXPECT_EQ(check_of(r), "inputs-modified") << message_of(r);
    EXPECT_NE(message_of(r).find(fmt::format("changed its input a: 1 byte(s) differ, the first at offset 0 (was "
                                             "0x{:02x}, now 0x{:02x})", p.a[0], p.a[0] ^ 0x11)),
              std::string::npos)
        << message_of(r);

    r = check("scribbles_input_cuda", p);
    ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
    EXPECT_EQ(check_of(r), "inputs-modified") << message_of(r);
    EXPECT_NE(message_of(r).find("changed its input sfa: 2 byte(s) differ"), std::string::npos) << message_of(r);
    if (layout == SfLayout::linear) {
      const int64_t at = p.l * p.m * p.kb() / 2 + 1;
      EXPECT_NE(message_of(r).find(fmt::format("the first at offset {} (was 0x{:02x}, now 0x{:02x})", at, p.sfa[at],
                                               p.sfa[at] ^ 0x01)),
                std::string::npos)
          << message_of(r);
    }
  }
}

TEST_F(CudaRunner, LargeInputsGuardIsCheckedOnTheDevice) {
  const CaseOutcome r = check("writes_before_input_cuda", large_problem(79, SfLayout::permuted));
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "guard") << message_of(r);
  EXPECT_NE(message_of(r).find(fmt::format("a: 1 byte(s) of the guard before the buffer were overwritten; the first at "
                                           "offset -5 from the buffer's start (expected 0x{:02x}, found 0x{:02x})",
                                           guard_byte(GuardPattern::bytes, kGuardBytes - 5),
                                           guard_byte(GuardPattern::bytes, kGuardBytes - 5) ^ 0x22)),
            std::string::npos)
      << message_of(r);
}

TEST_F(CudaRunner, PointerCacheIsStaleState) {
  const CaseOutcome r = check("stale_cache_cuda");
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "stale-state") << message_of(r);
}

// A kernel that reads its inputs on a stream of its own gives run 1's output in the stale call,
// as a pointer cache does; with the inputs complete before the calls it is right, so the verdict
// names the stream, not kept state. The runner's hold on its stream lasts at most 4 ms; beside
// other GPU work this kernel's own stream once started later than that, read complete inputs and
// passed, so here the hold lasts as long as the call.
TEST_F(CudaRunner, InputsReadOnAnotherStreamAreNotCalledStaleState) {
  const CaseOutcome r = check_stream_held("late_own_stream_cuda");
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "stream") << message_of(r);
  EXPECT_NE(message_of(r).find("complete before the call"), std::string::npos) << message_of(r);
}

TEST_F(CudaRunner, RefusingASupportedShapeFails) {
  const CaseOutcome r = check("refuses_supported_cuda");
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "refused-supported") << message_of(r);
}

// The built-in naive CUDA kernels pass every check on every data distribution.
TEST_F(CudaRunner, BuiltinNaiveKernelsPass) {
  const Registry builtins = Registry::with_builtins();
  const uint64_t seed = 1130;
  std::printf("seed %lu\n", (unsigned long)seed);
  int kernels = 0;
  for (const char* name : {"gemv_naive", "gemm_naive"}) {
    const Kernel* k = builtins.find(name);
    if (!k) {
      ADD_FAILURE() << "built-in kernel " << name << " is missing";
      continue;
    }
    ++kernels;
    Rng rng(seed);
    for (const DataSpec& spec : DataSpec::all()) {
      for (Op op : {Op::gemv, Op::gemm}) {
        if (!k->supports_op(static_cast<uint32_t>(op))) continue;
        const Problem p = generate_problem(rng, op, *k->info, spec, ShapeLimits{});
        CaseOptions o = options();
        o.stale_seed = rng();
        const CaseOutcome r = check_in_process(*k, p, o);
        EXPECT_EQ(r.verdict, CaseOutcome::Verdict::pass)
            << name << " " << spec.name() << ": " << check_of(r) << ": " << message_of(r) << " (" << r.case_file << ")";
      }
    }
  }
  EXPECT_EQ(kernels, 2);
}

}  // namespace
}  // namespace nvfp4
