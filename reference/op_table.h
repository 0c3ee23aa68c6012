// The ops the suite knows, one row each: the name used by case files and the command line, the
// value of NVFP4_OP_* in the ABI, the ABI version that introduced it and the facts about its
// shape that generic code asks instead of testing names. Everything that iterates over ops
// (names, parsing, the registry's known op sets, the draw's declared ops, the harness's modules)
// iterates over this table, so a new op is one row here and its module in harness/ops/.
//
// The header is a plain table with no dependencies beyond <cstdint>: kernels/registry.cc reads it
// to know which ops a plugin may declare (reference/ itself includes nothing from kernels/).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvfp4 {

// Facts about an op's shape that the generic code (problem checks, case files, draws, the kernel
// call) needs.
enum OpTrait : uint32_t {
  kOpNIsOne = 1u << 0,     // a GEMV: B is one row, n is 1 (a case file may leave n out)
  kOpGrouped = 1u << 1,    // a list of GEMMs with their own shapes (the problem's data are per group)
  kOpDual = 1u << 2,       // a second B with its own scales and global scale (B2, SFB2, alpha2)
  kOpQuantizes = 1u << 3,  // not a GEMM: one input X, outputs Q and SFQ (no n, no A or B)
};

// A read-only input an op has beyond its family's fields (a GEMV's bias), declared with the op's
// row: its name is its case-file key (`name = v0 v1 ...`), its field in the kernel's process and
// its buffer's name in failures; Problem::tensors holds its values. Generic code checks, parses,
// writes and sends it from this declaration, so such an input needs no new Problem member.
enum class TensorType : uint8_t {
  f32,  // finite FP32 values; a case file gives each in decimal or as a C99 hex float
};
// How many values: one per output row of every batch (l*m), per column (l*n), per output
// element (l*m*n) or per batch (l).
enum class TensorExtent : uint8_t { l_m, l_n, l_m_n, l };
struct TensorDecl {
  const char* name;
  TensorType type;
  TensorExtent extent;
};
// An op's declared tensors (none for the ops of SPEC revision 4).
struct TensorDecls {
  const TensorDecl* data = nullptr;
  size_t count = 0;
  constexpr const TensorDecl* begin() const { return data; }
  constexpr const TensorDecl* end() const { return data + count; }
};
template <size_t N>
constexpr TensorDecls tensor_decls(const TensorDecl (&decls)[N]) {
  return {decls, N};
}

// name, NVFP4_OP_* value, the ABI version that introduced it, its traits (OpTrait bits), its
// declared tensors ({} for none, or tensor_decls(kSomeArray) with the array above the table).
#define NVFP4_OP_TABLE(X)                   \
  X(gemv, 1, 1, kOpNIsOne, {})              \
  X(gemm, 2, 1, 0, {})                      \
  X(grouped_gemm, 3, 2, kOpGrouped, {})     \
  X(dual_gemm, 4, 2, kOpDual, {})           \
  X(quantize, 5, 3, kOpQuantizes, {})

// Values of NVFP4_OP_*.
enum class Op : uint32_t {
#define NVFP4_OP_ENUM(name, value, version, traits, tensors) name = value,
  NVFP4_OP_TABLE(NVFP4_OP_ENUM)
#undef NVFP4_OP_ENUM
};

struct OpInfo {
  Op op;
  const char* name;
  uint32_t abi_version;  // the first nvfp4_kernel_info.abi_version that may declare it
  uint32_t traits;
  TensorDecls tensors;
};

inline constexpr OpInfo kOpTable[] = {
#define NVFP4_OP_ROW(name, value, version, traits, tensors) {Op::name, #name, version, traits, tensors},
    NVFP4_OP_TABLE(NVFP4_OP_ROW)
#undef NVFP4_OP_ROW
};

// The row of op, or nullptr for a value no row has (an unchecked case file, a plugin's garbage).
constexpr const OpInfo* find_op(Op op) {
  for (const OpInfo& o : kOpTable)
    if (o.op == op) return &o;
  return nullptr;
}
constexpr bool op_has(Op op, uint32_t trait) {
  const OpInfo* o = find_op(op);
  return o != nullptr && (o->traits & trait) != 0;
}
// n is 1 by definition (a GEMV and its relatives).
constexpr bool op_n_is_one(Op op) { return op_has(op, kOpNIsOne); }
// Whether a problem of op has an n of its own (a case key, a drawn dimension).
constexpr bool op_has_n(Op op) { return !op_has(op, kOpNIsOne | kOpQuantizes); }
constexpr bool op_is_grouped(Op op) { return op_has(op, kOpGrouped); }
constexpr bool op_is_dual(Op op) { return op_has(op, kOpDual); }
constexpr bool op_quantizes(Op op) { return op_has(op, kOpQuantizes); }
// The tensors op declares (none for a value no row has).
constexpr TensorDecls op_tensors(Op op) {
  const OpInfo* o = find_op(op);
  return o != nullptr ? o->tensors : TensorDecls{};
}

// The bits (1u << value) of the ops with any of the traits.
constexpr uint32_t ops_with(uint32_t traits) {
  uint32_t bits = 0;
  for (const OpInfo& o : kOpTable)
    if (o.traits & traits) bits |= 1u << static_cast<uint32_t>(o.op);
  return bits;
}
// The bits (1u << value) of the ops a kernel of ABI version `version` may declare.
constexpr uint32_t ops_of_version(uint32_t version) {
  uint32_t bits = 0;
  for (const OpInfo& o : kOpTable)
    if (o.abi_version <= version) bits |= 1u << static_cast<uint32_t>(o.op);
  return bits;
}

}  // namespace nvfp4
