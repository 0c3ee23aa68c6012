// The kernel's side of a case: the inputs laid out in guarded buffers of the kernel's memory, the
// kernel called through the ABI, and what the call left behind, observed and returned. Nothing
// here judges: the process that calls a kernel (a worker, or the test itself for in-process
// checks) hands its observations to case_check.cc, which decides.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/process/device_buffers.h"
#include "harness/process/output_words.h"
#include "harness/process/tensor_rotation.h"
#include "kernels/registry.h"
#include "reference/problem.h"

namespace nvfp4 {

// The ABI's view of p with its tensors at these addresses (the one place that fills the struct):
// a GEMV, GEMM or dual GEMM (b2 and sfb2 then set by the caller), or a grouped problem's packed
// buffers (the group table then set by the caller). Fields a version-1 kernel never reads get
// their version-2 values: p's output type, alpha2, no groups.
nvfp4_problem to_abi(const Problem& p, const uint8_t* a, const uint8_t* b, const uint8_t* sfa, const uint8_t* sfb,
                     void* c, void* stream);

// One case as the kernel's process receives it: the problem (shape, layout, alpha, linear
// scales) and, for the stale-state call, new data of the same shape.
struct CaseData {
  Problem problem;
  std::optional<Problem> stale;
  // Instead of `stale`: the seed from which the op's stale_in_place turns the problem's own data
  // into the stale call's (op_module.h), in the kernel's process, in place.
  std::optional<uint64_t> stale_seed;
};

// One call of the kernel within a case. Buffers persist across the calls of a case, so a later
// call reuses the pointers of the first (the stale-state check depends on that).
struct CallSpec {
  uint8_t pad = 0x7F;         // the byte in the permuted layout's padding cells
  uint32_t poison = 0x7D5B;   // the word of the problem's output type every element of C holds before the call
  bool stale_data = false;    // upload CaseData::stale instead of the problem's data
  // The inputs are complete before the call (the weaker checks of mutation analysis, as torch's
  // tensors are); normally the runner's stream is held so work on another stream runs too early.
  bool inputs_ready_first = false;
  // The ABI problem's seed in place of the case's (a stochastic quantizer called with other seeds
  // for the statistical part of rule 7); unset for every other call.
  std::optional<uint64_t> seed;
};

struct GuardReport {
  std::string buffer;  // "a", "b", "sfa", "sfb", "b2", "sfb2", "c", a group's "c[g=3]", "group table"
  GuardDamage damage;
};

struct InputChange {
  std::string buffer;
  int64_t count = 0, first = 0;  // bytes that differ, the first's offset
  uint8_t was = 0, now = 0;
};

// What one call left behind.
struct CallObservation {
  enum class End : uint8_t {
    returned,      // the kernel returned and everything was read back
    exception,     // the kernel threw
    cuda_error,    // a CUDA error (named)
    device_hang,   // the device did not finish the call's work within the watchdog's time
    crash,         // the process died during the call (set by the parent)
    timeout,       // the watchdog ran out during the call (set by the parent)
    protocol,      // the process sent the parent garbage (set by the parent)
    input_fault,   // the kernel wrote to a read-only input during the call
    // The kernel's process could not allocate the suite's own memory for the case (reading it,
    // its laid-out inputs, its buffers, reading C back): the suite's error, never the kernel's.
    suite_memory,
  };
  End end = End::returned;
  int rc = 0;
  std::string error;         // what went wrong when end != returned
  // C as one word per element (out_type.h), in output order (a grouped problem's groups one after
  // another, whichever arrangement the kernel was handed); bytes where every output is bytes.
  OutputWords c;        // once the runner's stream was done
  OutputWords c_later;  // once the whole device was done (shares c's storage where equal)
  std::vector<GuardReport> guards;   // damaged guard regions only
  std::vector<InputChange> inputs;   // changed inputs only
  double seconds = 0;                // everything above: buffers laid out, uploaded, read back and compared, and the call
  double kernel_seconds = 0;         // of that, the kernel's call and the wait for its work (C's read-back included)
  double layout_seconds = 0;         // of that, the inputs laid out for the call and the buffers allocated
  double upload_seconds = 0;         // of that, the inputs written into the buffers, the outputs poisoned
  bool context_lost = false;         // the process must not be used for more cases
};

// Calls one kernel in this process. Owns the case's buffers between calls.
class KernelCaller {
 public:
  // protect_inputs: host inputs are read-only while the kernel runs (a write faults: worker
  // processes turn the fault into an input_fault report; in-process callers leave it off).
  KernelCaller(const Kernel& kernel, double timeout_s, bool protect_inputs = false);
  ~KernelCaller();

  // Makes the process's memory (for a CUDA kernel its context and the runner's stream) before
  // the first case, so that a report books it to the process's start and not to the first
  // case's lay-out (under MPS with eight lanes starting together, 0.7 s a lane on an H100). A
  // failure is left for the first call, which makes the memory again and reports it.
  void prepare();
  // Starts a case: the next call allocates buffers for this data.
  void begin_case(CaseData data);
  // Uploads (the problem's or the stale data, with spec's padding and poison), calls, waits,
  // reads back. Never throws for what the kernel does: a CUDA error, a hang of the device or an
  // exception of the kernel comes back as an observation.
  CallObservation call(const CallSpec& spec);
  // The process's CUDA context is gone (after a device error): no more calls here.
  bool unusable() const { return unusable_; }

 private:
  struct Buffers;
  struct Layout;
  const Kernel& kernel_;
  double timeout_s_;
  bool protect_inputs_;
  CaseData data_;
  bool holds_stale_ = false;  // data_.problem holds the stale data derived in place
  uint64_t data_generation_ = 0;  // moves on whenever the problems' data may have changed
  // The problem's tensors that the stale derive left as they are (OpModule::stale_in_buffers),
  // each with the move that makes its stale data, and the generation whose data they still hold
  // (the last before the derive): a buffer that holds them as uploaded then is moved in place.
  std::vector<std::pair<const std::vector<uint8_t>*, TensorRotation>> moved_;
  uint64_t moved_from_ = 0;
  std::unique_ptr<KernelMemory> memory_;  // its stream lasts as long as the caller
  std::unique_ptr<Buffers> buffers_;
  // The last call's laid-out buffers, kept for the next call of the same data, padding and poison
  // (a stochastic quantizer's calls with other seeds, a second opinion's re-run).
  std::unique_ptr<Layout> layout_;
  bool unusable_ = false;
  // Ends `out` in suite_memory (`memory` names what ran out) and lets go of what the call held.
  void end_in_suite_memory(CallObservation& out, const std::string& memory, bool called);
};

struct LaidOut;
// A worker whose kernel writes into a read-only input ends with the exit status
// kInputFaultExitBase + the index of that input's name in input_fault_names(the call's buffers),
// so the parent, laying the same case out again, names the input without a list of kinds.
constexpr int kInputFaultExitBase = 64;
// The names a write into a read-only input is reported by: each laid-out input's name without a
// group's "[g=G]" suffix (a grouped problem's groups share their tensor's name), once each, in
// order, then "group table" for a grouped problem. At most 255 - kInputFaultExitBase names (the
// exit status is a byte); the rest are still compared after the call.
std::vector<std::string> input_fault_names(const LaidOut& in, bool grouped);

// Installs the handler that turns a write into a read-only input into _exit(kInputFaultExitBase
// + its name's index) (worker processes only).
void install_input_fault_handler();

}  // namespace nvfp4
