// Executes the probe's MMA instructions on the GPU: each tile of a ProbeTiles is one execution of
// the instruction (one warp for mma.sync, one warpgroup for wgmma) on operands loaded from global
// memory, and its D comes back as raw bits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probe/matrix_unit_vectors.h"

namespace nvfp4 {

// Whether this process can run the instruction: a CUDA device whose architecture this build has
// code for (sm_90a: every instruction; sm_100a: the mma.sync ones). Otherwise `why` says why not.
bool instruction_available(const InstructionInfo& instr, std::string* why);

// D of every tile, row-major per tile: d[(t*m + i)*n + j]. Throws std::runtime_error on a CUDA error.
std::vector<uint32_t> run_on_device(const ProbeTiles& tiles);

// "NVIDIA H200, sm_90, driver 13000, runtime 13000" or why there is none.
std::string device_description();

}  // namespace nvfp4
