#!/usr/bin/env bash
# The GPU session in one command, for the device machine (or any CUDA machine with the `gpu`
# preset built, and the `fuzz` preset for campaigns). Logs and JSON go to $OUT (default
# ./gpu-check-out); the last lines printed are each step's summary.
#
# Usage: scripts/gpu-check.sh [STEP...]      (default: tests run mutants gpuref)
#   tests      every gpu-labelled ctest, one GPU per test over all GPUs (resource spec)
#   run        nvfp4check run, the main job (about a minute)
#   shapes     nvfp4check run on production shapes, judged by the GPU reference
#   mutants    nvfp4check mutants on the CUDA mutants and honest variants
#   gpuref     the GPU reference's timings on production shapes
#   campaign   a fuzz campaign (NVFP4_CAMPAIGN_SECONDS, default 240) against the naive CUDA
#              kernels, one worker per GPU, in the background while later steps run
#   broken     a campaign with no seeds against a CUDA kernel that drops the k tail (must find it)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -f .carry/gpu/source_dir ]; then
  source scripts/gpu-env.sh  # a build carried from another machine
else
  export NVFP4_BUILD="$PWD/build/gpu"
fi
B=$NVFP4_BUILD
FUZZ_BUILD=build/fuzz
[ -d .carry/fuzz ] && FUZZ_BUILD=.carry/fuzz
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
export OMP_WAIT_POLICY=passive CUDA_DEVICE_ORDER=PCI_BUS_ID
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests run mutants gpuref)
gpus=$(nvidia-smi -L | wc -l)
status=0
campaign_pid=""
step() { echo; echo "== $* ($(date -u +%H:%M:%S))"; }

step "GPUs"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader

for s in "${steps[@]}"; do
  case "$s" in
    campaign)
      step "fuzz campaign against gemv_naive and gemm_naive, $gpus GPU(s), in the background"
      scripts/fuzz-campaign.sh --build "$FUZZ_BUILD" --gpus "$gpus" --seconds "${NVFP4_CAMPAIGN_SECONDS:-240}" \
        --kernel gemv_naive,gemm_naive --seed 1130 --out "$OUT/campaign-naive" >"$OUT/campaign-naive.log" 2>&1 </dev/null &
      campaign_pid=$!
      ;;
    tests)
      step "ctest -L gpu over $gpus GPU(s)"
      bash scripts/ctest-resource-spec.sh -o "$OUT/resources.json"
      timeout "${NVFP4_TESTS_SECONDS:-330}" ctest --test-dir "$B" -L gpu -j "$((gpus * 2))" \
        --resource-spec-file "$OUT/resources.json" --output-on-failure --timeout 300 >"$OUT/ctest-gpu.log" 2>&1 || status=1
      grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Total Test time" "$OUT/ctest-gpu.log" | tail -25
      ;;
    run)
      step "nvfp4check run (the main job)"
      timeout 100 "$B/cli/nvfp4check" run --seed 1130 --report "$OUT/run.json" --case-dir "$OUT/cases" 2>&1 | tail -14 || status=1
      ;;
    shapes)
      step "nvfp4check run on production shapes (GPU reference)"
      for shape in 7168x1x16384x1 4096x1x7168x8 7169x1x16400x3 4096x4096x4096x1 129x7168x2048x1; do
        timeout 150 "$B/cli/nvfp4check" run --shape "$shape" --cases 2 --seed 1130 --kernel gemv_naive --kernel gemm_naive \
          --kernel gemv_fast --kernel gemm_tc --case-dir /tmp/nvfp4-shape-cases --report "$OUT/shape-$shape.json" \
          2>&1 | grep -E "^(kernel|gemv_|gemm_|time by step)|skipped:|Error|error" || status=1
        rm -rf /tmp/nvfp4-shape-cases
      done
      ;;
    mutants)
      step "nvfp4check mutants, CUDA"
      timeout 150 "$B/cli/nvfp4check" mutants --memory cuda --seed 1130 --report "$OUT/mutants-cuda.json" \
        --case-dir "$OUT/mutant-cases" >"$OUT/mutants-cuda.log" 2>&1 || status=1
      grep -A40 "^mutant " "$OUT/mutants-cuda.log" | tail -30
      ;;
    gpuref)
      step "GPU reference timings"
      timeout 90 "$B/bench/gpu_reference_bench" --json "$OUT/gpu_reference.json" --repeat 3 || status=1
      ;;
    broken)
      step "fuzz campaign, no seeds, against broken_k_tail_cuda (must be found)"
      timeout 200 scripts/fuzz-campaign.sh --build "$FUZZ_BUILD" --gpus 1 --seconds 90 --no-seeds --max-crashes 0 \
        --plugin "$FUZZ_BUILD/fuzz/libnvfp4_broken_k_tail.so" --kernel broken_k_tail_cuda --seed 1130 \
        --out "$OUT/campaign-broken" >"$OUT/campaign-broken.log" 2>&1
      [ $? -eq 1 ] || status=1  # 1 = failures found, which is what this step wants
      tail -15 "$OUT/campaign-broken.log"
      ;;
    *) echo "gpu-check.sh: unknown step $s" >&2; exit 2 ;;
  esac
done
if [ -n "$campaign_pid" ]; then
  step "waiting for the campaign against the naive kernels"
  wait "$campaign_pid" || status=1
  tail -20 "$OUT/campaign-naive.log"
fi
exit $status
