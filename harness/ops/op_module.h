// What is particular to one op, behind one interface: the engine, the checks, the kernel's
// process and the schedule ask the op's module instead of testing p.op. A module is a table of
// functions, one per op (the GEMM family's ops share theirs), registered by the op's row in
// reference/op_table.h (see `modules` below); adding an op is its row and its own files here.
//
// Outputs are words: one uint32_t per output element in the op's output buffers, in order,
// `width` bytes each in memory (2 or 4 for GEMM-family outputs, 1 for the bytes of a quantizer's
// Q and SFQ), so the generic checks (stream, determinism, unsupported-touched-output) compare
// them without knowing the op.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/process/kernel_call.h"
#include "harness/process/tensor_rotation.h"
#include "reference/exact_gemm.h"
#include "reference/oracle.h"

namespace nvfp4 {

struct CallContext;
struct Finding;
struct StaleVariant;
struct CasePlan;
struct CaseConstraints;
struct DrawnCase;
struct Shape;
struct ShapeLimits;
struct OracleSummary;
class Draws;

// One tensor a call hands the kernel, as laid out for that call (scales in the problem's layout,
// padding cells filled). Its name is what a failure calls it ("sfa", a group's "sfa[g=3]"), and
// a write into it during the call is reported by that name (input_fault_names).
struct InputTensor {
  std::string name;
  GuardPattern guard;  // what its guards hold: NaN scales around scale tensors, else bytes
  std::vector<uint8_t> bytes;
  // Instead of `bytes`: the problem's own tensor as it is uploaded (no copy of a 4 GiB X), alive
  // as long as the problem the call was laid out from.
  const std::vector<uint8_t>* borrowed = nullptr;
  // Instead of both: the tensor as pieces end to end, each borrowed from the problem (data) or
  // `size` copies of `fill` (data == nullptr). A packed grouped problem's A and B are its groups'
  // own bytes, not copied into one 2 GiB vector for every call.
  struct Piece {
    const uint8_t* data;
    int64_t size;
    uint8_t fill;
  };
  std::vector<Piece> pieces;
  bool in_pieces = false;
  // With `borrowed`: the tensor is the borrowed bytes moved as this says (a stale call's data
  // that the kernel's process did not derive on the host: OpModule::stale_in_buffers).
  std::optional<TensorRotation> rotated;

  int64_t size() const;
  // Writes the size() bytes to dst.
  void write_to(uint8_t* dst) const;
  // How `now` (size() bytes) differs from the tensor: the number of bytes and the first of them.
  struct Difference {
    int64_t count = 0, first = -1;
    uint8_t was = 0, now = 0;
  };
  Difference compare(const uint8_t* now) const;
};

// One buffer the kernel writes: `words` words of `width` bytes, holding `before` (the runner's
// poison, and for a quantizer's permuted SFQ the padding byte in its padding cells) before the
// call.
struct OutputTensor {
  std::string name;
  int64_t words = 0;
  int width = 2;
  std::vector<uint8_t> before;
};

// Everything one call uploads. For a grouped problem, the group table is built from the buffers
// (see kernel_call.cc): `packed` with each group's byte offsets in `offsets[g]` and first C
// element in `c_offset[g]`, or the separate arrangement (four inputs and one output per
// non-empty group).
struct LaidOut {
  std::vector<InputTensor> inputs;
  std::vector<OutputTensor> outputs;
  bool packed = false;
  std::vector<std::array<int64_t, 4>> offsets;
  std::vector<int64_t> c_offset;
};

// A tensor of the problem left as it is by OpModule::stale_in_buffers, and the move that makes
// its stale data.
struct MovedTensor {
  const std::vector<uint8_t>* tensor = nullptr;
  TensorRotation rotation;
};

struct OpModule {
  // The op, whose row in op_table.h gives its name, ABI value, ABI version and traits.
  Op op;
  const OpInfo& info() const { return *find_op(op); }
  // Why p lies outside what info declares ("" inside), and whether such a problem is handed to
  // the kernel to see it refused (only where the kernel could tell from the ABI's fields).
  std::string (*unsupported_reason)(const nvfp4_kernel_info& info, const Problem& p);
  bool (*probes_refusal)(const nvfp4_kernel_info& info, const Problem& p);
  // The buffers of one call: inputs with spec.pad in their padding cells, outputs poisoned
  // with spec.poison. kernel_flags: the declaring kernel's flags (the arrangement it takes).
  LaidOut (*lay_out)(const Problem& p, const CallSpec& spec, uint32_t kernel_flags);
  // The op's own fields of the ABI problem, pointing into the call's buffers (in lay_out's
  // order; NULL for an empty tensor).
  void (*point_abi)(nvfp4_problem& abi, const Problem& p, const std::vector<uint8_t*>& inputs,
                    const std::vector<uint8_t*>& outputs);
  // The oracle on one call's output words: the summary for the report, and a finding when
  // anything is wrong. unwritten: outputs that still hold the call's poison where the reference
  // differs.
  std::optional<Finding> (*judge)(const CallContext& x, OracleSummary* summary);
  std::optional<Finding> (*unwritten)(const CallContext& x);
  // New data in p's shape through the same pointers, with its reference.
  StaleVariant (*stale_variant)(const Problem& p, const ExactResult& ref, uint64_t seed);
  // "128x1x256x2", or the op's own: what reports and warm-up print for the shape.
  std::string (*shape_text)(const Problem& p);
  // The most output words one call of p can leave (what the parent accepts from a worker).
  int64_t (*output_words)(const Problem& p);
  // Where the op's stale data is a fixed function of the case's own data and the stale seed:
  // turns p's data into stale_variant(p, ..., seed)'s in place (undo: back again). The kernel's
  // process then derives the stale call's data itself instead of receiving a second copy (a huge
  // quantize case's X is 4 GiB). Null: the stale data travels.
  void (*stale_in_place)(Problem& p, uint64_t seed, bool undo);
  // As stale_in_place, except that the tensors a call hands the kernel byte for byte as the
  // problem holds them (never laid out: a GEMV's A and B) are left as they are and returned with
  // the move that makes their stale data; the kernel's process applies it as it writes them into
  // the call's buffers (on the device, from the buffer's copy of the last upload, where it keeps
  // one). undo: the other tensors back (the ones left never moved); returns nothing. Null: the
  // kernel's process uses stale_in_place.
  std::vector<MovedTensor> (*stale_in_buffers)(Problem& p, uint64_t seed, bool undo);
  // The exact reference of p (p valid and with data; throws std::invalid_argument otherwise).
  ExactResult (*reference)(const Problem& p);
  // The op's rule on output words, all of them and one (what the re-runs, hints, error maps and
  // the mutation driver's weaker checks judge with): nullptr where the outputs are not one word
  // per element (a quantizer's bytes, which only `judge` reads).
  OracleSummary (*judge_words)(const Problem& p, const ExactResult& ref, const uint32_t* words, const Policy& policy);
  ElementVerdict (*judge_word)(const Problem& p, const ExactResult& ref, int64_t index, uint32_t actual,
                               const Policy& policy);
  // The op's part of a case's draw, after what the schedule draws for every op (the shape and
  // data classes, the op itself, the scale layout): plan.problem's other fields and its shape,
  // within what info declares. shape: the command line's, or nullptr.
  void (*draw)(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints& c, const ShapeLimits& limits,
               const Shape* shape, Op op, CasePlan& plan);
  // The data of a case `draw` planned (out as draw_case leaves it: problem, spec, kind).
  void (*draw_data)(Draws& d, const nvfp4_kernel_info& info, DrawnCase& out);
  // A seed-only case's data from p.seed and p.generator (p's shape checked), keeping each tensor
  // the case gives with the right length; sets p.data_from_seed when every tensor was drawn.
  void (*expand_seed)(Problem& p);
};

// Each op's module under the name of its op-table row (modules::gemv, ..., modules::quantize),
// defined with the op's files in harness/ops/ (the GEMM family's in op_module.cc). op_modules()
// lists one per row of NVFP4_OP_TABLE, so an op is registered by its row alone, and a row
// without a module fails to link.
namespace modules {
#define NVFP4_OP_MODULE_DECLARE(name, value, version, traits, tensors) extern const OpModule name;
NVFP4_OP_TABLE(NVFP4_OP_MODULE_DECLARE)
#undef NVFP4_OP_MODULE_DECLARE
}  // namespace modules

// Every op's module, in op_table.h's order (the order ops are declared, drawn and listed in).
const std::vector<OpModule>& op_modules();
// The module of p's op (every row of op_table.h has one).
const OpModule& op_module(Op op);
// Every op's name ("gemv", ..., "quantize"), for the command line's choices.
std::vector<std::string> op_names();
// The exact reference of p, by its op's module.
inline ExactResult op_reference(const Problem& p) { return op_module(p.op).reference(p); }

// The GEMM family's module (GEMV, GEMM, grouped and dual GEMM share their buffers, oracle and
// stale data): its entries, where the engine has always kept them.
namespace gemm_family {
std::string unsupported_reason(const nvfp4_kernel_info& info, const Problem& p);  // case_check.cc
bool probes_refusal(const nvfp4_kernel_info& info, const Problem& p);              // case_check.cc
LaidOut lay_out(const Problem& p, const CallSpec& spec, uint32_t kernel_flags);   // kernel_call.cc
void point_abi(nvfp4_problem& abi, const Problem& p, const std::vector<uint8_t*>& inputs,
               const std::vector<uint8_t*>& outputs);                              // kernel_call.cc
std::optional<Finding> judge(const CallContext& x, OracleSummary* summary);       // checks.cc
std::optional<Finding> unwritten(const CallContext& x);                           // checks.cc
StaleVariant stale_variant(const Problem& p, const ExactResult& ref, uint64_t seed);  // case_check.cc
void stale_in_place(Problem& p, uint64_t seed, bool undo);                        // case_check.cc
std::vector<MovedTensor> stale_in_buffers(Problem& p, uint64_t seed, bool undo);  // case_check.cc
std::string shape_text(const Problem& p);                                         // report.cc
void draw(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints& c, const ShapeLimits& limits,
          const Shape* shape, Op op, CasePlan& plan);                             // schedule.cc
void draw_data(Draws& d, const nvfp4_kernel_info& info, DrawnCase& out);          // schedule.cc
void expand_seed(Problem& p);                                                     // generators.cc
}  // namespace gemm_family

// The quantize module's entry points the schedule and generators use (its draws).
namespace quantize_op {
// Fills plan.problem's quantize fields and shape from d, within what info declares.
void draw(Draws& d, const nvfp4_kernel_info& info, const ShapeLimits& limits, CasePlan& plan);
// X from p.seed with p.generator ("quantize/<class>"), every other field as p has it. Past
// kRowSeededElements elements each row is drawn from a seed of its own, rows in parallel (the
// same classes, so a huge case still meets every recipe decision; the same bytes for any number
// of threads).
void fill_x(Problem& p);
constexpr int64_t kRowSeededElements = int64_t(1) << 26;
// The huge tier's shape (schedule.h): l = 1, k among production widths (2688, the flashinfer
// report's; 5120; 7168) within the kernel's multiples, m just past 2^31 / k, from `pick`, X of
// two bytes an element where the kernel declares BF16 or FP16; false,
// changing nothing, when the device's free bytes do not hold the case with margin.
bool draw_huge_shape(uint64_t pick, const nvfp4_kernel_info& info, uint64_t device_free_bytes, Problem& p);
// A case of the huge tier's size (l*m*k of 2^31 elements or more).
inline bool is_huge(const Problem& p) { return op_quantizes(p.op) && p.l * p.m * p.k >= (int64_t(1) << 31); }
// What one call of a huge case holds on the device: X, the global scales, Q and SFQ (the
// permuted layout's padding included), and the guards.
uint64_t device_bytes(const Problem& p);
bool is_generator(const std::string& generator);
}  // namespace quantize_op

}  // namespace nvfp4
