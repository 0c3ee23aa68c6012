#!/usr/bin/env bash
# The tensor-core validation on the H200 in one command: gemm_tc after its fix (the seed-11 case, the seed-11 run,
# production shapes including split-k, its speed), the tensor-core mutants with their control, and
# the honest tensor-core variants (mutation analysis, timed runs, one large shape each). For the
# device machine with the `gpu` preset built at build/gpu or carried in .carry/gpu
# (scripts/device-pack.sh here, then this script there). Logs and JSON go to $OUT (default
# ./gpu-validate-tc-out); each step ends with one verdict line, and summary.txt collects them.
# All steps take about 8 minutes; pass step names to run fewer.
#
# Usage: scripts/gpu-validate-tc.sh [STEP...]     (default: every step, in this order)
#   replay   the seed-11 case (corpus/regressions/gemm_tc/) on gemm_tc and the honest tc variants
#   seed11   nvfp4check run --kernel gemm_tc --seed 11 --seconds 30, then seed 11's first 400 cases
#            (the old gemm_tc failed case 265)
#   shapes   gemm_tc on production shapes and each honest tc variant on 800x800x16384x16 (GPU
#            reference; also shows they are not pathologically slow)
#   mutants  nvfp4check mutants --memory cuda on the tc mutants, their control and the honest tc
#            variants (budget 200, as CI), then mut_cuda_mma_subnormal_operands alone with budget
#            2000: how many cases this suite needs to see the issue-12 quirk
#   ctest    mutants_cuda_test restricted to the same kernels
#   honest   each honest tc variant through nvfp4check run for NVFP4_TC_SECONDS (default 45)
#   bench    nvfp4_gpu_bench --only gemm: gemm_tc's timings after the fix (bench/GPU_RESULTS.md)
# Environment: OUT, NVFP4_TC_SECONDS, NVFP4_TC_SEED (default 1212, for the seeded steps but seed11).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
if [ -f .carry/gpu/source_dir ]; then
  source scripts/gpu-env.sh  # a build carried from another machine
else
  export NVFP4_BUILD="$PWD/build/gpu"
fi
B=$NVFP4_BUILD
CLI=$B/cli/nvfp4check
HONEST=$B/mutation/honest/libnvfp4_honest.so
MUTANTS=$B/mutation/mutants/libnvfp4_mutants.so
OUT=${OUT:-$PWD/gpu-validate-tc-out}
SECONDS_EACH=${NVFP4_TC_SECONDS:-45}
SEED=${NVFP4_TC_SEED:-1212}
CASE=corpus/regressions/gemm_tc/2d22e93cca829e03.case
HONEST_TC=(honest_cuda_mma_f16 honest_cuda_mma_split_k_bf16 honest_cuda_wgmma_f16)
MUTANTS_TC=(ctl_cuda_mma_unmutated mut_cuda_mma_k16_step_dropped mut_cuda_mma_subnormal_operands
            mut_cuda_split_k_partial_twice)
mkdir -p "$OUT"
export OMP_WAIT_POLICY=passive CUDA_DEVICE_ORDER=PCI_BUS_ID
for f in "$CLI" "$HONEST" "$MUTANTS"; do
  [ -e "$f" ] || { echo "gpu-validate-tc.sh: $f is missing: build the gpu preset (scripts/device-pack.sh)" >&2; exit 2; }
done
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(replay seed11 shapes mutants ctest honest bench)
status=0
step() { echo; echo "== $* ($(date -u +%H:%M:%S))"; }
# verdict NAME RC [EXPECTED_RC]: one summary line per check; a wrong exit code fails the script.
verdict() {
  local want=${3:-0} line
  if [ "$2" -eq "$want" ]; then line="ok    $1 (exit $2)"; else line="FAIL  $1 (exit $2, expected $want)"; status=1; fi
  echo "$line" | tee -a "$OUT/summary.txt"
}
kernel_args() { for k in "$@"; do printf -- '--kernel\n%s\n' "$k"; done; }

step "GPU and build"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
echo "build $B, seed $SEED, $SECONDS_EACH s per honest variant" | tee "$OUT/summary.txt"

for s in "${steps[@]}"; do
  case "$s" in
    replay)
      step "replay the seed-11 case on gemm_tc and the honest tc variants"
      timeout 120 "$CLI" replay "$CASE" --kernel gemm_tc --report "$OUT/replay-gemm_tc.json" \
        --case-dir "$OUT/replay-cases" >"$OUT/replay-gemm_tc.log" 2>&1
      verdict "replay $CASE on gemm_tc" $?
      tail -5 "$OUT/replay-gemm_tc.log"
      mapfile -t args < <(kernel_args "${HONEST_TC[@]}")
      timeout 120 "$CLI" replay "$CASE" --plugin "$HONEST" "${args[@]}" --report "$OUT/replay-honest.json" \
        --case-dir "$OUT/replay-cases" >"$OUT/replay-honest.log" 2>&1
      verdict "replay $CASE on the honest tc variants" $?
      tail -6 "$OUT/replay-honest.log"
      ;;
    seed11)
      step "nvfp4check run --kernel gemm_tc --seed 11 (--seconds 30, then --cases 400)"
      timeout 120 "$CLI" run --kernel gemm_tc --seed 11 --seconds 30 --report "$OUT/seed11-30s.json" \
        --case-dir "$OUT/seed11-cases" >"$OUT/seed11-30s.log" 2>&1
      verdict "run gemm_tc --seed 11 --seconds 30" $?
      tail -4 "$OUT/seed11-30s.log"
      timeout 240 "$CLI" run --kernel gemm_tc --seed 11 --cases 400 --report "$OUT/seed11-400.json" \
        --case-dir "$OUT/seed11-cases" >"$OUT/seed11-400.log" 2>&1
      verdict "run gemm_tc --seed 11 --cases 400" $?
      tail -4 "$OUT/seed11-400.log"
      ;;
    shapes)
      step "production shapes: gemm_tc (split-k on the 128-row ones), honest tc variants at 800x800x16384x16"
      for shape in 4096x4096x4096x1 128x7168x16384x1 129x7168x2048x1 127x26x16384x3; do
        timeout 150 "$CLI" run --shape "$shape" --cases 2 --seed "$SEED" --kernel gemm_tc \
          --case-dir /tmp/nvfp4-tc-shape-cases --report "$OUT/shape-gemm_tc-$shape.json" >"$OUT/shape-gemm_tc-$shape.log" 2>&1
        verdict "gemm_tc --shape $shape" $?
        rm -rf /tmp/nvfp4-tc-shape-cases
      done
      for k in "${HONEST_TC[@]}"; do
        timeout 200 "$CLI" run --shape 800x800x16384x16 --cases 1 --seed "$SEED" --plugin "$HONEST" --kernel "$k" \
          --timeout 120 --case-dir /tmp/nvfp4-tc-shape-cases --report "$OUT/shape-$k.json" >"$OUT/shape-$k.log" 2>&1
        verdict "$k --shape 800x800x16384x16" $?
        grep -E "^(kernel|$k)|time by step|kernel " "$OUT/shape-$k.log" | head -6
        rm -rf /tmp/nvfp4-tc-shape-cases
      done
      ;;
    mutants)
      step "nvfp4check mutants --memory cuda: tc mutants, control, honest tc variants"
      mapfile -t args < <(kernel_args "${MUTANTS_TC[@]}" "${HONEST_TC[@]}")
      timeout 300 "$CLI" mutants --memory cuda --seed "$SEED" --plugin "$MUTANTS" --honest-plugin "$HONEST" "${args[@]}" \
        --report "$OUT/mutants-tc.json" --case-dir "$OUT/mutant-cases" >"$OUT/mutants-tc.log" 2>&1
      verdict "mutants (budget 200): every tc mutant killed, no false alarm" $?
      grep -A12 "^mutant " "$OUT/mutants-tc.log"
      grep -A8 "^honest " "$OUT/mutants-tc.log"
      # Not a pass/fail step: how far the suite has to go to see gemm_tc's old bug.
      timeout 240 "$CLI" mutants --memory cuda --seed "$SEED" --plugin "$MUTANTS" --honest-plugin "$HONEST" \
        --kernel mut_cuda_mma_subnormal_operands --budget 2000 --no-weak --honest-cases 0 \
        --report "$OUT/mutants-subnormal-2000.json" --case-dir "$OUT/mutant-cases" >"$OUT/mutants-subnormal-2000.log" 2>&1
      echo "info  mut_cuda_mma_subnormal_operands with budget 2000 (exit $?): $(grep -m1 "mut_cuda_mma_subnormal_operands:" \
        "$OUT/mutants-subnormal-2000.log")" | tee -a "$OUT/summary.txt"
      ;;
    ctest)
      step "mutants_cuda_test, tensor-core kernels only"
      timeout 300 "$B/mutation/mutants_cuda_test" --gtest_filter='*mma*:*wgmma*:*split_k_partial_twice*' \
        >"$OUT/mutants_cuda_test-tc.log" 2>&1
      verdict "mutants_cuda_test (tc kernels)" $?
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==" "$OUT/mutants_cuda_test-tc.log" | tail -12
      ;;
    honest)
      step "honest tc variants, $SECONDS_EACH s each"
      for k in "${HONEST_TC[@]}"; do
        timeout $((SECONDS_EACH + 90)) "$CLI" run --plugin "$HONEST" --kernel "$k" --seconds "$SECONDS_EACH" --seed "$SEED" \
          --report "$OUT/honest-$k.json" --case-dir "$OUT/honest-cases-$k" >"$OUT/honest-$k.log" 2>&1
        verdict "run $k for ${SECONDS_EACH}s" $?
        tail -3 "$OUT/honest-$k.log"
      done
      ;;
    bench)
      step "nvfp4_gpu_bench --only gemm (gemm_tc after the fix)"
      if [ -x "$B/bench/gpu/nvfp4_gpu_bench" ]; then
        timeout 240 "$B/bench/gpu/nvfp4_gpu_bench" --only gemm --iters 50 --out "$OUT/gpu_bench_gemm.json" \
          >"$OUT/gpu_bench_gemm.log" 2>&1
        verdict "nvfp4_gpu_bench --only gemm (checks, then timings)" $?
        grep -A20 '^shape ' "$OUT/gpu_bench_gemm.log" | head -20
      else
        echo "skip  bench: $B/bench/gpu/nvfp4_gpu_bench not built" | tee -a "$OUT/summary.txt"
      fi
      ;;
    *) echo "gpu-validate-tc.sh: unknown step $s" >&2; exit 2 ;;
  esac
done
step "summary"
cat "$OUT/summary.txt"
exit $status
