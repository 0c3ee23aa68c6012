// Operand tiles for the matrix-unit probe: targeted families that each measure one parameter of
// the model (kept bits, rounding of addends and result, where C enters, block size, subnormal
// operands, carries, specials), and seeded random distributions (spread exponents and
// cancellation as in Khattak and Mikaitis, plus NVFP4 data as our kernels feed it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probe/matrix_unit_instructions.h"

namespace nvfp4 {

// Operands of `count` executions of one instruction (tiles), as raw bits.
struct ProbeTiles {
  const InstructionInfo* instr = nullptr;
  int64_t count = 0;
  std::vector<uint32_t> a;  // a[(t*m + i)*k + x]: row i of A of tile t
  std::vector<uint32_t> b;  // b[(t*n + j)*k + x]: column j of B of tile t
  std::vector<uint32_t> c;  // c[(t*m + i)*n + j]: FP32 (int32 for s8)
  std::vector<uint16_t> family;             // per tile: index into family_names
  std::vector<std::string> family_names;    // targeted family or random distribution

  const uint32_t* row(int64_t t, int i) const { return &a[(t * instr->m + i) * instr->k]; }
  const uint32_t* col(int64_t t, int j) const { return &b[(t * instr->n + j) * instr->k]; }
  uint32_t c_at(int64_t t, int i, int j) const { return c[(t * instr->m + i) * instr->n + j]; }
  int64_t outputs() const { return count * instr->m * instr->n; }
};

// Every targeted family for the instruction (a few thousand vectors, no randomness except a
// fixed-seed sample of block-size triples for k = 32).
ProbeTiles targeted_tiles(const InstructionInfo& instr);

// At least `vectors` random output vectors (every output of a tile counts as one), split over
// the distributions; tile t is a pure function of (seed, instruction, t).
ProbeTiles random_tiles(const InstructionInfo& instr, uint64_t seed, int64_t vectors);

// The exact bits of a value in an operand format or FP32; throws if the value is not exact there.
uint32_t encode_operand(MmaOperand operand, double value);
uint32_t encode_fp32(double value);

}  // namespace nvfp4
