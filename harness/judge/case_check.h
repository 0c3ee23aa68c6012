// One case checked against one kernel, decided in the process that holds the reference: the
// kernel's calls are made by an Executor (in a worker process, or in this one), and every
// check of checks.h is applied here to what they left behind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/judge/checks.h"
#include "harness/process/executor.h"

namespace nvfp4 {

// Where one lane writes its cases' write-ahead records: one file, written over for each case
// (a new file a case cost the small cases a sixth of their time, most of it the filesystem making
// and dropping an inode), named "<kernel>-in-flight-<pid>-<lane>.case" so that a run killed mid-case
// leaves it there, and renamed to the case's own name when the case fails. Removed when the
// lane ends. Not thread-safe: one lane's.
class RecordSlot {
 public:
  RecordSlot(std::string dir, std::string name) : dir_(std::move(dir)), name_(std::move(name)) {}
  ~RecordSlot();
  RecordSlot(const RecordSlot&) = delete;
  RecordSlot& operator=(const RecordSlot&) = delete;
  // Writes text over the slot's file and returns the file's path; final_path is where keep()
  // moves it. Throws std::runtime_error when it cannot be written.
  std::string write(const std::string& text, const std::string& final_path);
  // The last record under its own name (its final_path), returned; the slot's next write makes
  // a new file.
  std::string keep();
  const std::string& path() const { return path_; }

 private:
  std::string dir_, name_, path_, final_path_;
  int fd_ = -1;
  size_t size_ = 0;  // the file's length
};

struct CaseOptions {
  bool check_determinism = true;  // a second run with other padding and poison must match bit for bit
  bool check_stale = true;        // new data through the same pointers, judged again
  std::optional<Policy> policy;   // instead of the one the kernel's flags call for
  uint64_t stale_seed = 0;        // picks the stale-state data (stale_variant)
  // The case is written here before any call is made (a crash or a hang keeps its reproducer)
  // and removed again when it passes, unless keep_passing. "" = not saved.
  std::string case_dir;
  bool keep_passing = false;
  // A replayed input: reported as the case file, never written or removed.
  std::string existing_file;
  // The lane's record file, where the write-ahead record goes (unless keep_passing); null: a
  // file of the case's own name each case.
  RecordSlot* record_slot = nullptr;
};

// Where one case's time went in the process that judges it, in seconds, by step (the steps do
// not overlap).
struct CaseTimes {
  double start = 0;      // the kernel's process started and its kernel described (the first case's)
  // Data expanded from its seed, and the stale-state data; the exact reference. Where they are
  // computed during the kernel's calls (a case of 2^18 multiply-adds and up whose record is its
  // seed), the part the calls did not hide.
  double generate = 0;
  double reference = 0;
  double save = 0;       // the case file written ahead, then removed (or written in full)
  // In the kernel's process: the inputs laid out and the buffers allocated; the inputs written
  // and the outputs poisoned; every buffer read back and compared (guards, inputs, C again).
  double layout = 0;
  double upload = 0;
  double buffers = 0;
  // The rest of the round trips to the kernel's process: messages encoded, sent and decoded, a
  // process started again after one was lost, and a lost call's wait.
  double channel = 0;
  double judge = 0;      // the oracle and every check
  // The kernel's calls and the wait for their work, by call (a rerun with zero padding counts
  // with run 1, whose check asked for it).
  double calls[kCaseCalls] = {};
  // Adds each step, named as in a report's stage_seconds ("run 1", ...), to add(name, seconds).
  template <class Add>
  void each(Add&& add) const {
    if (start > 0) add("start", start);
    add("generate", generate);
    add("reference", reference);
    add("save", save);
    add("buffers: lay-out", layout);
    add("buffers: upload", upload);
    add("buffers: read-back", buffers);
    for (int x = 0; x < kCaseCalls; ++x)
      if (calls[x] > 0) add(to_string(static_cast<CaseCall>(x)), calls[x]);
    add("channel", channel);
    add("judge", judge);
  }
  double total() const {
    double sum = 0;
    each([&](const char*, double seconds) { sum += seconds; });
    return sum;
  }
};

struct CaseOutcome {
  enum class Verdict { pass, fail, unsupported, skipped };
  Verdict verdict = Verdict::pass;
  std::optional<Finding> finding;  // set when the verdict is fail
  std::string message;             // why a case was skipped, or what was refused
  CaseCall call = CaseCall::none;  // the call the finding came from
  Problem problem;                 // the data the judged output belongs to (the stale data if that failed)
  ExactResult reference;
  OutputWords c;                   // the judged output words (the failing one, or run 1's)
  Policy policy;
  OracleSummary summary;           // the oracle's judgement of that output
  std::string case_file;           // the saved case (kept when it failed)
  std::string case_file_error;     // why the case could not be saved (saving is best effort); "" when it was
  int64_t calls = 0;               // kernel calls made
  bool context_lost = false;       // the kernel's process was lost (crash, timeout, CUDA error)
  CaseTimes times;
};

const char* verdict_name(CaseOutcome::Verdict v);

// Runs every check of one case. A problem outside the kernel's declared constraints is instead
// checked to come back NVFP4_UNSUPPORTED with C untouched (verdict unsupported or fail). A case
// that is never handed to the kernel (of the other scale semantics with sign bits set, or one
// probes_refusal keeps from it) is skipped, with the reason: nothing was checked. Throws
// std::invalid_argument for a problem that is not a valid case, or whose `expect` disagrees
// with the reference (the case or the reference is wrong: nothing can be judged).
CaseOutcome check_case(Executor& executor, const Problem& problem, const CaseOptions& options);
// The same, taking the problem's data over instead of copying them (a medium case's megabytes):
// the outcome's problem holds them afterwards.
CaseOutcome check_case(Executor& executor, Problem&& problem, const CaseOptions& options);

// One call of the kernel on p (NaN padding, poisoned C), for properties that compare outputs: its
// output, or std::runtime_error naming the check the call failed (crash, error code, guard, ...).
std::vector<uint32_t> run_kernel_once(Executor& executor, const Problem& p);

// The policy a kernel's flags call for; a CUDA kernel adding on matrix units gets the rule of this
// machine's device (measured for Hopper, provisional elsewhere: reference/accumulation.h).
Policy kernel_policy(const KernelDesc& k);

// Why p lies outside what info declares (op, output type, layout, multiples (per group for a
// grouped problem), max_groups, UNIT_ALPHA (alpha2 and every group's alpha too), one n and k for
// a GROUPS_PACKED kernel); "" when inside. GEMV's n is 1 by definition, so n_multiple
// constrains the other ops only.
std::string unsupported_reason(const nvfp4_kernel_info& info, const Problem& p);
// Whether a problem outside info's declaration is handed to the kernel to check that it refuses
// it: only when the kernel could tell (a version-1 kernel sees version-1 problems only; an
// undeclared output type, an undeclared grouped or dual op, or groups that cannot be packed for
// a GROUPS_PACKED kernel are never handed over).
bool probes_refusal(const nvfp4_kernel_info& info, const Problem& p);

// New data in p's shape, through the same pointers: GEMV and GEMM: A is negated, the whole
// 16-element blocks of every row of A and B (and their scales) are rotated together, and rows
// of A, rows of B and batches are rotated, so every input buffer changes (but for degenerate
// data), C becomes -C permuted, S, t and g of each output are kept, and the reference follows
// from p's without a second one. Grouped: each group so. Dual: B2 negated, the same rotations
// (B2 with B), the reference computed again.
struct StaleVariant {
  Problem problem;
  ExactResult reference;
};

// GEMV and GEMM: where the stale variant (stale_seed) moved each output: the stale data's output
// `to` is the problem's output sources[to], negated (stale_gemm).
std::vector<int64_t> stale_output_sources(const Problem& p, uint64_t stale_seed);
// Whether a GEMV's, GEMM's or dual GEMM's stale output is run 1's moved so and negated (sign bit
// flipped; a zero may stand for a zero of either sign, a NaN for any NaN); a grouped GEMM's,
// every non-empty group's as its own GEMM's (its seed splitmix64(stale_seed ^ g)). The stale
// reference is the problem's moved and negated the same way (sums negated, a dual GEMM's U sums
// and so v; S, t, g, G and NaN kept), and the oracle's verdict on -c against -x is its verdict on
// c against x under the policies whose bounds are functions of |x|, S, t and g (rule 6: of
// |silu(G)|, |U| and G) (fp32, fp16-accum, exact: RN is symmetric, an exact zero rounds to +0
// either way, +0 and -0 are equal, NaN stays NaN): the stale call is then judged exactly as run 1
// was, and its judgement is run 1's.
bool stale_output_mirrors_run1(const Problem& p, uint64_t stale_seed, const OutputWords& run1, const OutputWords& stale);
StaleVariant stale_variant(const Problem& p, const ExactResult& ref, uint64_t seed);

// "<kernel>-<op>-<m>x<n>x<k>x<l>-<hash of the text>": the one naming scheme of saved cases.
std::string case_file_stem(const std::string& kernel, const Problem& p, const std::string& text);
// Writes p as a case file in dir (with `expect` from ref when it is small) and returns its path.
// Data drawn from a seed is saved as that seed above 1 MiB, or always with `compact` (the
// write-ahead record of a case before it runs: a few hundred bytes; a failing case is then
// written again in full, its data explicit, so it reproduces whatever the generator becomes).
// With slot, the text goes into the slot's file instead (whose path is returned), and its own
// name is where RecordSlot::keep moves it.
std::string save_case(const std::string& kernel, const Problem& p, const ExactResult* ref, const std::string& dir,
                      const std::string& suffix = "", bool compact = false, RecordSlot* slot = nullptr);

}  // namespace nvfp4
