// The MMA instructions the matrix-unit probe executes: shape, operand format, the architecture
// they need, and the reference model (reference/matrix_unit_model.h) they are checked against.
#pragma once

#include <string>
#include <vector>

#include "reference/accumulation.h"
#include "reference/matrix_unit_model.h"

namespace nvfp4 {

// The values seed the random vectors (random_tiles): new instructions go at the end.
enum class ProbeInstruction {
  mma_f16, mma_bf16, mma_s8, wgmma_f16, wgmma_bf16, wgmma_e4m3, mma_s8_k16,
  wgmma_f16_ss, wgmma_bf16_ss, wgmma_e4m3_ss,  // A from shared memory too
};

struct InstructionInfo {
  ProbeInstruction id;
  const char* name;  // command-line name: mma_f16, wgmma_e4m3, ...
  const char* ptx;   // the instruction as executed
  int m, n, k;       // one execution computes m x n outputs, each a dot product of length k
  bool needs_sm90a;  // wgmma exists on sm_90a only
  const MatrixUnitModel* model;
  // The rule the model proves for ONE instruction with C counted as an addend (for a kernel's
  // chain of instructions see reference/accumulation.h; Hopper's FP8 path has no such rule).
  AccumulationRule single_instruction_rule;
};

// FP8 on Hopper: 13 kept bits and a result cut to 13 fraction bits (docs/MATRIX_UNITS.md).
inline constexpr AccumulationRule kH200Fp8SingleInstructionRule{13, 2048};
inline constexpr AccumulationRule kIntegerExactRule{31, 1};

const std::vector<InstructionInfo>& probe_instructions();
const InstructionInfo* find_instruction(const std::string& name);  // nullptr if unknown

}  // namespace nvfp4
