// The ops the suite knows, one row each: the name used by case files and the command line, the
// value of NVFP4_OP_* in the ABI, the ABI version that introduced it and the facts about its
// shape that generic code asks instead of testing names. Everything that iterates over ops
// (names, parsing, the registry's known op sets, the draw's declared ops, the harness's modules)
// iterates over this table, so a new op is one row here and its module in harness/ops/.
//
// The header is a plain table with no dependencies beyond <cstdint>: kernels/registry.cc reads it
// to know which ops a plugin may declare (reference/ itself includes nothing from kernels/).
#pragma once

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

// name, NVFP4_OP_* value, the ABI version that introduced it, its traits (OpTrait bits).
#define NVFP4_OP_TABLE(X)                   \
  X(gemv, 1, 1, kOpNIsOne)                  \
  X(gemm, 2, 1, 0)                          \
  X(grouped_gemm, 3, 2, kOpGrouped)         \
  X(dual_gemm, 4, 2, kOpDual)               \
  X(quantize, 5, 3, kOpQuantizes)

// Values of NVFP4_OP_*.
enum class Op : uint32_t {
#define NVFP4_OP_ENUM(name, value, version, traits) name = value,
  NVFP4_OP_TABLE(NVFP4_OP_ENUM)
#undef NVFP4_OP_ENUM
};

struct OpInfo {
  Op op;
  const char* name;
  uint32_t abi_version;  // the first nvfp4_kernel_info.abi_version that may declare it
  uint32_t traits;
};

inline constexpr OpInfo kOpTable[] = {
#define NVFP4_OP_ROW(name, value, version, traits) {Op::name, #name, version, traits},
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
