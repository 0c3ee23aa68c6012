// The probe's instruction table.
#include "probe/matrix_unit_instructions.h"

namespace nvfp4 {

const std::vector<InstructionInfo>& probe_instructions() {
  static const std::vector<InstructionInfo> kTable{
      {ProbeInstruction::mma_f16, "mma_f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 16, 8, 16, false,
       &kH200MmaF16, kMatrixUnitRule},
      {ProbeInstruction::mma_bf16, "mma_bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 16, 8, 16,
       false, &kH200MmaBf16, kMatrixUnitRule},
      {ProbeInstruction::mma_s8, "mma_s8", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", 16, 8, 32, false,
       &kH200MmaS8, kIntegerExactRule},
      {ProbeInstruction::mma_s8_k16, "mma_s8_k16", "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32", 16, 8, 16,
       false, &kH200MmaS8K16, kIntegerExactRule},
      {ProbeInstruction::wgmma_f16, "wgmma_f16", "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", 64, 8, 16,
       true, &kH200WgmmaF16, kMatrixUnitRule},
      {ProbeInstruction::wgmma_bf16, "wgmma_bf16", "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16", 64, 8,
       16, true, &kH200WgmmaBf16, kMatrixUnitRule},
      {ProbeInstruction::wgmma_e4m3, "wgmma_e4m3", "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", 64, 8,
       32, true, &kH200WgmmaE4m3, kH200Fp8SingleInstructionRule},
      // The same with A from shared memory (descriptor A, as most wgmma kernels use it).
      {ProbeInstruction::wgmma_f16_ss, "wgmma_f16_ss", "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 (A in smem)",
       64, 8, 16, true, &kH200WgmmaF16, kMatrixUnitRule},
      {ProbeInstruction::wgmma_bf16_ss, "wgmma_bf16_ss",
       "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 (A in smem)", 64, 8, 16, true, &kH200WgmmaBf16,
       kMatrixUnitRule},
      {ProbeInstruction::wgmma_e4m3_ss, "wgmma_e4m3_ss",
       "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 (A in smem)", 64, 8, 32, true, &kH200WgmmaE4m3,
       kH200Fp8SingleInstructionRule},
  };
  return kTable;
}

const InstructionInfo* find_instruction(const std::string& name) {
  for (const InstructionInfo& info : probe_instructions())
    if (name == info.name) return &info;
  return nullptr;
}

}  // namespace nvfp4
