// One kernel call and what it left behind (see kernel_call.h).
#include "harness/kernel_call.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>

#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

// The inputs as one call sees them: scales in the problem's layout, padding cells filled.
struct LaidOut {
  std::vector<uint8_t> a, b, sfa, sfb;
};

LaidOut lay_out(const Problem& p, uint8_t pad) {
  LaidOut in{p.a, p.b, p.sfa, p.sfb};
  if (p.sf_layout == SfLayout::permuted) {
    in.sfa = sf_to_permuted(p.sfa.data(), p.m, p.kb(), p.l, pad);
    in.sfb = sf_to_permuted(p.sfb.data(), p.n, p.kb(), p.l, pad);
  }
  return in;
}


// Read-only input ranges for the fault handler: plain globals, read in a signal handler.
struct ProtectedRange {
  std::atomic<uintptr_t> begin{0}, end{0};
};
ProtectedRange g_protected[4];

void on_segv(int sig, siginfo_t* info, void*) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(info->si_addr);
  for (int x = 0; x < 4; ++x)
    if (at >= g_protected[x].begin.load() && at < g_protected[x].end.load()) _exit(kInputFaultExitBase + x);
  // Not ours: die of the signal as the kernel would have.
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

nvfp4_problem to_abi(const Problem& p, const uint8_t* a, const uint8_t* b, const uint8_t* sfa, const uint8_t* sfb,
                     uint16_t* c, void* stream) {
  nvfp4_problem abi{};
  abi.op = static_cast<uint32_t>(p.op);
  abi.m = p.m;
  abi.n = p.n;
  abi.k = p.k;
  abi.l = p.l;
  abi.a = a;
  abi.b = b;
  abi.sfa = sfa;
  abi.sfb = sfb;
  abi.sf_layout = static_cast<uint32_t>(p.sf_layout);
  abi.alpha = p.alpha;
  abi.c = c;
  abi.stream = stream;
  abi.out_type = NVFP4_OUT_FP16;
  abi.alpha2 = 1.0f;  // what SPEC section 5 gives every problem that is not a dual GEMM
  return abi;
}

const char* input_buffer_name(int index) {
  static const char* const kNames[4] = {"a", "b", "sfa", "sfb"};
  return index >= 0 && index < 4 ? kNames[index] : "?";
}

void install_input_fault_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

// One case's buffers (from the memory's pool); the memory and its stream last as long as the caller.
struct KernelCaller::Buffers {
  std::unique_ptr<GuardedBuffer> a, b, sfa, sfb, c;

  Buffers(KernelMemory& memory, const Problem& p) {
    const bool permuted = p.sf_layout == SfLayout::permuted;
    a = memory.allocate(p.a_bytes(), GuardPattern::bytes);
    b = memory.allocate(p.b_bytes(), GuardPattern::bytes);
    sfa = memory.allocate(permuted ? sf_permuted_bytes(p.m, p.kb(), p.l) : p.sfa_bytes(), GuardPattern::nan_scales);
    sfb = memory.allocate(permuted ? sf_permuted_bytes(p.n, p.kb(), p.l) : p.sfb_bytes(), GuardPattern::nan_scales);
    c = memory.allocate(p.c_elems() * 2, GuardPattern::nan_fp16);
  }
  GuardedBuffer* input(int x) const { return x == 0 ? a.get() : x == 1 ? b.get() : x == 2 ? sfa.get() : sfb.get(); }
};

KernelCaller::KernelCaller(const Kernel& kernel, double timeout_s, bool protect_inputs)
    : kernel_(kernel), timeout_s_(timeout_s), protect_inputs_(protect_inputs && !kernel.is_cuda()) {}

KernelCaller::~KernelCaller() {
  // After a hang or a broken context nothing may be freed (cudaFree would wait forever).
  if (unusable_) {
    (void)buffers_.release();
    (void)memory_.release();
  }
}

void KernelCaller::begin_case(CaseData data) {
  data_ = std::move(data);
  if (!unusable_) buffers_.reset();
}

CallObservation KernelCaller::call(const CallSpec& spec) {
  CallObservation out;
  if (unusable_) {
    out.end = CallObservation::End::cuda_error;
    out.error = "the process's CUDA context was lost by an earlier call";
    out.context_lost = true;
    return out;
  }
  const Problem& p = spec.stale_data && data_.stale ? *data_.stale : data_.problem;
  const auto start = std::chrono::steady_clock::now();
  try {
    if (!memory_) memory_ = KernelMemory::create(kernel_.info->memory);
    KernelMemory& mem = *memory_;
    if (!buffers_) buffers_ = std::make_unique<Buffers>(mem, p);
    Buffers& buf = *buffers_;
    const LaidOut in = lay_out(p, spec.pad);
    const std::vector<uint16_t> poisoned(static_cast<size_t>(p.c_elems()), spec.poison);
    // The runner's stream is held first, so work the kernel puts on any other stream runs ahead
    // of its data.
    if (!spec.inputs_ready_first) mem.hold_stream();
    buf.a->upload(in.a.data());
    buf.b->upload(in.b.data());
    buf.sfa->upload(in.sfa.data());
    buf.sfb->upload(in.sfb.data());
    buf.c->upload(reinterpret_cast<const uint8_t*>(poisoned.data()));
    if (spec.inputs_ready_first) mem.synchronize(timeout_s_);

    nvfp4_problem abi = to_abi(p, buf.a->data(), buf.b->data(), buf.sfa->data(), buf.sfb->data(),
                               reinterpret_cast<uint16_t*>(buf.c->data()), mem.stream());
    if (protect_inputs_) {
      for (int x = 0; x < 4; ++x) {
        GuardedBuffer* g = buf.input(x);
        g->set_read_only(true);
        g_protected[x].begin = reinterpret_cast<uintptr_t>(g->data());
        g_protected[x].end = reinterpret_cast<uintptr_t>(g->data()) + static_cast<uintptr_t>(g->size());
      }
    }
    int rc = 0;
    try {
      rc = kernel_.run(abi);
    } catch (const std::exception& e) {
      out.end = CallObservation::End::exception;
      out.error = e.what();
    } catch (...) {
      out.end = CallObservation::End::exception;
      out.error = "an exception that is no std::exception";
    }
    mem.release_stream();
    if (protect_inputs_) {
      for (int x = 0; x < 4; ++x) {
        g_protected[x].begin = g_protected[x].end = 0;
        buf.input(x)->set_read_only(false);
      }
    }
    out.rc = rc;
    mem.after_call();
    // C once the runner's stream is done...
    buf.c->fetch_async();
    mem.synchronize(timeout_s_);
    const auto words = [&](const GuardedBuffer& g) {
      std::vector<uint16_t> w(static_cast<size_t>(g.size() / 2));
      if (!w.empty()) std::memcpy(w.data(), g.staged_data(), w.size() * 2);
      return w;
    };
    out.c = words(*buf.c);
    // ...and once everything the kernel enqueued anywhere is finished: if C changed meanwhile,
    // the kernel wrote it from a stream other than problem.stream. Then every buffer is fetched
    // once (one wait) for its guards and, for inputs, its data.
    mem.synchronize_device(timeout_s_);
    static const char* const kNames[5] = {"a", "b", "sfa", "sfb", "c"};
    GuardedBuffer* all[5] = {buf.a.get(), buf.b.get(), buf.sfa.get(), buf.sfb.get(), buf.c.get()};
    for (GuardedBuffer* g : all) g->fetch_async();
    mem.synchronize(timeout_s_);
    out.c_later = kernel_.is_cuda() ? words(*buf.c) : out.c;
    if (out.end == CallObservation::End::exception) {
      out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return out;
    }
    for (int x = 0; x < 5; ++x) {
      const GuardDamage d = all[x]->staged_guard_damage();
      if (!d.intact) out.guards.push_back({kNames[x], d});
    }
    const std::vector<uint8_t>* sent[4] = {&in.a, &in.b, &in.sfa, &in.sfb};
    for (int x = 0; x < 4; ++x) {
      const uint8_t* now = all[x]->staged_data();
      const std::vector<uint8_t>& was = *sent[x];
      if (was.empty() || std::memcmp(now, was.data(), was.size()) == 0) continue;
      InputChange change;
      change.buffer = kNames[x];
      for (size_t y = 0; y < was.size(); ++y)
        if (now[y] != was[y] && change.count++ == 0) {
          change.first = static_cast<int64_t>(y);
          change.was = was[y];
          change.now = now[y];
        }
      out.inputs.push_back(change);
    }
  } catch (const DeviceError& e) {
    out.end = e.hung() ? CallObservation::End::device_hang : CallObservation::End::cuda_error;
    out.error = e.what();
    out.context_lost = kernel_.is_cuda();
    unusable_ = out.context_lost;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace nvfp4
