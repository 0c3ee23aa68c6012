// Kernels that attack the runner rather than compute wrongly, for the isolation tests of
// `nvfp4check run` and `replay`: each must end as a failure with its case file, never as a crash
// of the suite, a hang, or a PASS. Environment NVFP4_HOSTILE_PIDFILE names where the forking
// kernel writes its child's pid, so the test can see that child was killed.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "mutation/wrong/wrong_host_kernels.h"

namespace {

constexpr uint32_t kBothOps = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);

enum Attack {
  kThrowsRuntimeError,     // throw std::runtime_error
  kThrowsBadAlloc,         // throw std::bad_alloc
  kForgesVerdict,          // writes a fake "done" event into fd 3, then crashes
  kClosesChannel,          // closes fd 3, then computes honestly
  kChdirAndWrong,          // chdir("/"), then one FP16 ulp off
  kForksHoldingChannel,    // forks a child that keeps fd 3 open and sleeps, then crashes
  kModifiesAndRestores,    // changes an input during the call and puts it back before returning
  kExitsZero,              // exit(0) in the middle of the call
  kWritesEveryFd,          // writes bytes into every descriptor it can, then computes honestly
  kEditsGroupTable,        // grouped GEMM: changes group[0].m and puts it back, then computes honestly
  kCutsSharedFiles,        // truncates the memory files the runner shares with it and tries to seal
                           // them against writes and growth, then computes honestly
  kCount
};

#define HOSTILE(name) {NVFP4_ABI_VERSION, name, NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, 0}
const nvfp4_kernel_info kInfos[kCount] = {
    HOSTILE("throws_runtime_error_host"), HOSTILE("throws_bad_alloc_host"),   HOSTILE("forges_verdict_host"),
    HOSTILE("closes_channel_host"),       HOSTILE("chdir_and_wrong_host"),    HOSTILE("forks_holding_channel_host"),
    HOSTILE("modifies_and_restores_host"), HOSTILE("exits_zero_host"),    HOSTILE("writes_every_fd_host"),
    {NVFP4_ABI_VERSION, "edits_group_table_host", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GROUPED_GEMM, kBothLayouts, 0, 1,
     1, 1, 0},
    HOSTILE("cuts_shared_files_host"),
};

}  // namespace

extern "C" {

int nvfp4_kernel_count(void) { return kCount; }

const nvfp4_kernel_info* nvfp4_kernel_get(int index) {
  return index >= 0 && index < kCount ? &kInfos[index] : nullptr;
}

int nvfp4_kernel_run(int index, const nvfp4_problem* p) {
  switch (index) {
    case kThrowsRuntimeError:
      throw std::runtime_error("the hostile kernel threw on purpose");
    case kThrowsBadAlloc:
      throw std::bad_alloc();
    case kForgesVerdict: {
      // What the old worker protocol read as "all work done, all passed".
      static const char kFake[] = "{\"event\":\"done\"}\n{\"event\":\"result\",\"result\":{\"verdict\":\"pass\"}}\n";
      (void)!write(3, kFake, sizeof kFake - 1);
      raise(SIGSEGV);
      return NVFP4_ERROR;
    }
    case kClosesChannel:
      close(3);
      nvfp4::test::honest_host_gemm(p, false);
      return NVFP4_OK;
    case kChdirAndWrong:
      (void)!chdir("/");
      nvfp4::test::honest_host_gemm(p, false);
      for (int64_t e = 0; e < p->l * p->m * p->n; ++e)
        if ((p->c[e] & 0x7C00u) != 0x7C00u) p->c[e] ^= 1u;  // one ulp off, NaN and Inf kept
      return NVFP4_OK;
    case kForksHoldingChannel: {
      const pid_t child = fork();
      if (child == 0) {
        sleep(600);  // holds every fd of the worker, fd 3 included
        _exit(0);
      }
      if (const char* file = std::getenv("NVFP4_HOSTILE_PIDFILE")) {
        if (FILE* f = std::fopen(file, "w")) {
          std::fprintf(f, "%d\n", static_cast<int>(child));
          std::fclose(f);
        }
      }
      raise(SIGSEGV);
      return NVFP4_ERROR;
    }
    case kModifiesAndRestores: {
      uint8_t* a = const_cast<uint8_t*>(p->a);
      const uint8_t was = a[0];
      a[0] = static_cast<uint8_t>(was ^ 0xFF);  // a scratch use of the input buffer...
      nvfp4::test::honest_host_gemm(p, false);
      a[0] = was;                               // ...tidied away before returning
      nvfp4::test::honest_host_gemm(p, false);
      return NVFP4_OK;
    }
    case kExitsZero:
      std::exit(0);
    case kWritesEveryFd: {
      // A length prefix that promises more than will ever come, then noise: what a Python kernel
      // writing into every descriptor it finds sends the runner.
      static const unsigned char kNoise[] = {0x10, 0x00, 0x00, 0x01, 'f', 'o', 'r', 'g', 'e', 'd'};
      for (int fd = 0; fd < 64; ++fd) (void)!write(fd, kNoise, sizeof kNoise);
      nvfp4::test::honest_host_gemm(p, false);
      return NVFP4_OK;
    }
    case kCutsSharedFiles: {
      // The worker's ends of the runner's memory files (worker_protocol.h: kWorkerInputFd,
      // kWorkerOutputFd). Both processes map them: cut short, a mapping past the end would be a
      // SIGBUS in the runner.
      for (int fd : {4, 5}) {
        (void)ftruncate(fd, 0);
        (void)fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK);
      }
      nvfp4::test::honest_host_gemm(p, false);
      return NVFP4_OK;
    }
    case kEditsGroupTable: {
      if (p->op != NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
      // A scratch use of the table, undone at once: nothing is left for a comparison after the call.
      volatile int64_t* m = &const_cast<nvfp4_group*>(p->group)[0].m;
      *m = *m + 1;
      *m = *m - 1;
      for (int64_t g = 0; g < p->groups; ++g) {
        const nvfp4_group& q = p->group[g];
        if (q.m == 0) continue;
        nvfp4_problem one = *p;  // each group as the GEMM it is
        one.op = NVFP4_OP_GEMM;
        one.m = q.m, one.n = q.n, one.k = q.k, one.l = 1;
        one.a = q.a, one.b = q.b, one.sfa = q.sfa, one.sfb = q.sfb;
        one.c = static_cast<uint16_t*>(q.c);
        one.alpha = q.alpha;
        nvfp4::test::honest_host_gemm(&one, false);
      }
      return NVFP4_OK;
    }
  }
  return NVFP4_ERROR;
}

}  // extern "C"
