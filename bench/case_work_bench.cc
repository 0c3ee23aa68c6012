// The parent's CPU work a case of a kernel's schedule costs, step by step, with no kernel: draw and
// generate (Schedule::at), the exact reference, the stale variant (data and reference: the runner
// computes it only where a check looks at it, which an honest kernel's case below never needs,
// so this step is what a case costs that does), the judging of an honest deterministic kernel's three calls as the runner does it (run 1 by the
// oracle; run 2, equal to it, takes its judgement; the stale call's output, the stale reference's
// words, is checked to mirror run 1's and then takes its judgement too), and the channel: the
// case's message to the kernel's process and the three calls' answers with their outputs, each
// encoded and decoded (both processes' share; the processes' wake-ups are not in it).
// On a GPU the calls take a fraction of a millisecond, so for the grouped and dual schedules these
// steps are what bounds a lane (bench/THROUGHPUT.md); here they are measured on any machine.
//
// The declarations are those of the CUDA kernels whose schedule rows issue 33 tracks (the same
// ops, layouts, output types and flags), so no device is needed. The reference runs on `threads`
// OpenMP threads: a lane's share of the cores, rounded up (16 cores: 2 at the default 12 lanes and
// at 8). Cases at or past the GPU reference's threshold (2^26 products; the large class never
// reaches it) would go to the device and are left out.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <omp.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/draw/schedule.h"
#include "harness/judge/case_check.h"
#include "harness/ops/op_module.h"
#include "harness/process/worker_protocol.h"
#include "kernels/nvfp4_kernel_abi.h"
#include "reference/oracle.h"

namespace {

struct Declared {
  const char* name;
  nvfp4_kernel_info info;
};

constexpr uint32_t kLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
constexpr uint32_t kOutTypes = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);

const Declared kKernels[] = {
    {"grouped_gemm_tc",
     {NVFP4_ABI_VERSION, "grouped_gemm_tc", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GROUPED_GEMM, kLayouts, 90, 1, 1, 1,
      NVFP4_FLAG_MMA_ACCUMULATE, kOutTypes, 0, 0, 0, 0, 0, 0}},
    {"dual_gemm_naive",
     {NVFP4_ABI_VERSION, "dual_gemm_naive", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_DUAL_GEMM, kLayouts, 90, 1, 1, 1, 0,
      kOutTypes, 0, 0, 0, 0, 0, 0}},
    {"gemm_tc",
     {NVFP4_ABI_VERSION, "gemm_tc", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GEMM, kLayouts, 90, 1, 1, 1,
      NVFP4_FLAG_MMA_ACCUMULATE, 1u << NVFP4_OUT_FP16, 0, 0, 0, 0, 0, 0}},
};

constexpr int64_t kCases = 200;

// The schedule's first kCases cases that a kernel with this declaration is handed and whose
// reference stays on the CPU.
std::vector<nvfp4::ScheduledCase> schedule_cases(const Declared& k) {
  nvfp4::ScheduleOptions options;
  options.seed = 1;
  const nvfp4::Schedule schedule(k.info, k.name, options);
  std::vector<nvfp4::ScheduledCase> cases;
  for (int64_t i = 0; static_cast<int64_t>(cases.size()) < kCases; ++i) {
    nvfp4::ScheduledCase c = schedule.at(i);
    if (c.kind == nvfp4::CaseKind::unsupported || !nvfp4::unsupported_reason(k.info, c.problem).empty()) continue;
    double work = 0;
    if (nvfp4::op_is_grouped(c.problem.op)) {
      for (const nvfp4::Group& g : c.problem.groups) work += static_cast<double>(g.m) * g.n * g.k;
    } else {
      work = static_cast<double>(c.problem.l) * c.problem.m * c.problem.n * c.problem.k;
    }
    if (work >= static_cast<double>(int64_t(1) << 26)) continue;
    cases.push_back(std::move(c));
  }
  return cases;
}

enum Step { kDraw, kReference, kStale, kJudge, kChannel };

// Args: kernel (index into kKernels), step, threads. Time per case, over the schedule's cases in turn.
void BM_CaseWork(benchmark::State& state) {
  const Declared& k = kKernels[state.range(0)];
  const Step step = static_cast<Step>(state.range(1));
  omp_set_num_threads(static_cast<int>(state.range(2)));
  state.SetLabel(std::string(k.name) + " " +
                 (step == kDraw             ? "draw+generate"
                  : step == kReference      ? "reference"
                  : step == kStale          ? "stale"
                  : step == kJudge          ? "judge"
                                            : "channel: the case and three answers, encoded and decoded"));
  const std::vector<nvfp4::ScheduledCase> cases = schedule_cases(k);
  std::vector<nvfp4::ExactResult> refs;
  std::vector<nvfp4::StaleVariant> stale;
  std::vector<std::vector<uint32_t>> words, stale_words;  // what the calls would have returned
  std::vector<nvfp4::OutputWords> outputs, run2, stale_outputs;  // the same as the channel hands them over
  if (step != kDraw && step != kReference)
    for (const nvfp4::ScheduledCase& c : cases) refs.push_back(nvfp4::op_reference(c.problem));
  if (step == kJudge || step == kChannel)
    for (size_t x = 0; x < cases.size(); ++x) {
      stale.push_back(nvfp4::stale_variant(cases[x].problem, refs[x], cases[x].stale_seed));
      words.push_back(refs[x].words());
      stale_words.push_back(stale[x].reference.words());
      outputs.emplace_back(words.back());
      run2.emplace_back(words.back());
      stale_outputs.emplace_back(stale_words.back());
    }
  // The channel: each case as the runner sends it (its data, the stale call derived in the
  // kernel's process, three calls), through a memory file as between the two processes.
  std::vector<nvfp4::CaseData> data;
  const std::vector<nvfp4::CallSpec> plan{{0x7F, 0x7D5B, false}, {0x00, 0x7D5A, false}, {0x7F, 0x7D5B, true}};
  nvfp4::SharedFile shared, answers;
  if (step == kChannel) {
    for (const nvfp4::ScheduledCase& c : cases) data.push_back({c.problem, std::nullopt, c.stale_seed});
    shared = nvfp4::SharedFile::create("case_work_bench");
    answers = nvfp4::SharedFile::create("case_work_bench_answers");
  }
  const nvfp4::Policy policy = nvfp4::Policy::for_flags(k.info.flags);
  nvfp4::ScheduleOptions options;
  options.seed = 1;
  const nvfp4::Schedule schedule(k.info, k.name, options);
  size_t x = 0;
  for (auto _ : state) {
    const nvfp4::ScheduledCase& c = cases[x];
    switch (step) {
      case kDraw: {
        nvfp4::ScheduledCase again = schedule.at(c.index);
        benchmark::DoNotOptimize(again.problem.a.data());
        break;
      }
      case kReference: {
        nvfp4::ExactResult r = nvfp4::op_reference(c.problem);
        benchmark::DoNotOptimize(r.elems.data());
        break;
      }
      case kStale: {
        nvfp4::StaleVariant v = nvfp4::stale_variant(c.problem, refs[x], c.stale_seed);
        benchmark::DoNotOptimize(v.reference.elems.data());
        break;
      }
      case kJudge: {
        nvfp4::OracleSummary s = nvfp4::judge_words(c.problem, refs[x], words[x].data(), policy);
        benchmark::DoNotOptimize(s.failing);
        benchmark::DoNotOptimize(outputs[x] == run2[x]);
        if (!nvfp4::stale_output_mirrors_run1(c.problem, c.stale_seed, outputs[x], stale_outputs[x])) {
          s = nvfp4::judge_words(stale[x].problem, stale[x].reference, stale_words[x].data(), policy);
          benchmark::DoNotOptimize(s.failing);
        }
        break;
      }
      case kChannel: {
        shared.reset();
        const std::vector<uint8_t> frame = nvfp4::encode_run_case(static_cast<int64_t>(x), data[x], plan, &shared);
        const nvfp4::WorkerMessage m = nvfp4::decode_message(frame.data() + nvfp4::kFrameHeaderBytes,
                                                             frame.size() - nvfp4::kFrameHeaderBytes, &shared);
        benchmark::DoNotOptimize(m.index());
        // The three calls' answers: each output (and its read-back once the device was done, the
        // same storage) through the worker's memory file, decoded by the runner.
        for (int64_t call = 0; call < 3; ++call) {
          answers.reset();
          nvfp4::CallDoneMsg done;
          done.case_id = static_cast<int64_t>(x);
          done.index = call;
          done.observation.c = call < 2 ? outputs[x] : stale_outputs[x];
          done.observation.c_later = done.observation.c;
          const std::vector<uint8_t> answer = nvfp4::encode_message(done, &answers);
          const nvfp4::WorkerMessage back = nvfp4::decode_message(answer.data() + nvfp4::kFrameHeaderBytes,
                                                                  answer.size() - nvfp4::kFrameHeaderBytes, &answers);
          benchmark::DoNotOptimize(back.index());
        }
        break;
      }
    }
    x = (x + 1) % cases.size();
  }
  state.counters["cases"] = static_cast<double>(cases.size());
}

// Every step on two threads; the reference on one too (how much the second thread gives).
void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"kernel", "step", "threads"});
  const int64_t kernels = static_cast<int64_t>(std::size(kKernels));
  for (int64_t kernel = 0; kernel < kernels; ++kernel)
    for (int64_t step = kDraw; step <= kChannel; ++step) b->Args({kernel, step, 2});
  for (int64_t kernel = 0; kernel < kernels; ++kernel) b->Args({kernel, kReference, 1});
}
// Whole passes over the cases, so every case weighs the same in the mean.
BENCHMARK(BM_CaseWork)->Apply(Args)->Iterations(2 * kCases)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  // As `nvfp4check` runs (cli/main.cc): OpenMP's idle threads wait passively, and freed memory
  // stays in the process.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
  }
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
