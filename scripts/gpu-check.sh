#!/usr/bin/env bash
# The GPU session in one command, for the device machine (or any CUDA machine with the `gpu`
# preset built): every `gpu`-labelled test spread over all GPUs, the main job, the CUDA mutants
# and the GPU reference's timings. Logs and JSON go to $OUT (default ./gpu-check-out).
# Usage: scripts/gpu-check.sh [--quick]   (--quick: tests and the main job only)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -f .carry/gpu/source_dir ]; then
  source scripts/gpu-env.sh  # a build carried from another machine
else
  export NVFP4_BUILD="$PWD/build/gpu"
fi
B=$NVFP4_BUILD
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
export OMP_WAIT_POLICY=passive CUDA_DEVICE_ORDER=PCI_BUS_ID
status=0
step() { echo; echo "== $* ($(date -u +%H:%M:%S))"; }

step "GPUs"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader

step "ctest -L gpu over every GPU"
bash scripts/ctest-resource-spec.sh -o "$OUT/resources.json"
gpus=$(nvidia-smi -L | wc -l)
timeout 330 ctest --test-dir "$B" -L gpu -j "$((gpus * 2))" --resource-spec-file "$OUT/resources.json" \
  --output-on-failure --timeout 400 >"$OUT/ctest-gpu.log" 2>&1 || status=1
grep -E "tests passed|tests failed|Failed|\(Failed\)|\(Timeout\)|\(Skipped\)|Total Test time" "$OUT/ctest-gpu.log" | tail -20

step "nvfp4check run (the main job)"
timeout 100 "$B/cli/nvfp4check" run --seed 1130 --report "$OUT/run.json" --case-dir "$OUT/cases" 2>&1 | tail -15 || status=1

[ "${1:-}" = "--quick" ] && exit $status

step "nvfp4check mutants, CUDA"
timeout 150 "$B/cli/nvfp4check" mutants --memory cuda --seed 1130 --report "$OUT/mutants-cuda.json" \
  --case-dir "$OUT/mutant-cases" >"$OUT/mutants-cuda.log" 2>&1 || status=1
tail -40 "$OUT/mutants-cuda.log"

step "GPU reference timings"
timeout 90 "$B/bench/gpu_reference_bench" --json "$OUT/gpu_reference.json" --repeat 3 || status=1
exit $status
