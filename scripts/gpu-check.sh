#!/usr/bin/env bash
# The GPU session in one command, for the device machine (or any CUDA machine with the `gpu`
# preset built, and the `fuzz` preset for campaigns). Logs and JSON go to $OUT (default
# ./gpu-check-out); the last lines printed are each step's summary.
#
# Usage: scripts/gpu-check.sh [STEP...]      (default: tests run mutants gpuref)
#   tests      every gpu-labelled ctest, one GPU per test over all GPUs (resource spec)
#   run        nvfp4check run of every built-in CUDA kernel with a FRESH seed (printed; or
#              NVFP4_RUN_SEED) for NVFP4_RUN_SECONDS (default 150) in all
#   shapes     nvfp4check run on production shapes, judged by the GPU reference
#   mutants    nvfp4check mutants on the CUDA mutants and honest variants, as declared and again
#              with every kernel judged as declaring NVFP4_FLAG_MMA_ACCUMULATE
#   honest     every honest CUDA variant (tensor-core ones included) through run for
#              NVFP4_HONEST_SECONDS (default 120) in all: false alarms and exact-regime share
#   gpuref     the GPU reference's timings on production shapes
#   throughput scripts/throughput-bench.sh (cases/s by size class; NVFP4_BASELINE: another build)
#   python     the Python package's GPU tier (torch, load_inline, Triton, the GPU MODE cheats)
#   campaign   a fuzz campaign (NVFP4_CAMPAIGN_SECONDS, default 240) against the CUDA kernels,
#              naive and fast, one worker per GPU, in the background while later steps run
#   broken     a campaign with no seeds against a CUDA kernel that drops the k tail (must find it)
#   grouped    grouped_gemm_tc checked (sampled outputs, exact reference) and timed against the byte
#              floor and cuBLAS's grouped FP16 GEMM (cublasGemmGroupedBatchedEx) on MoE shapes
#              (the CUDA grouped and dual kernels' unit tests are in `tests`: CudaGrouped, CudaDual)
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
      cseed=${NVFP4_CAMPAIGN_SEED:-$(date +%s)}
      step "fuzz campaign against the naive and fast CUDA kernels, $gpus GPU(s), seed $cseed, in the background"
      scripts/fuzz-campaign.sh --build "$FUZZ_BUILD" --gpus "$gpus" --seconds "${NVFP4_CAMPAIGN_SECONDS:-240}" \
        --kernel gemv_naive,gemm_naive,gemv_fast,gemm_tc --seed "$cseed" --out "$OUT/campaign-naive" \
        >"$OUT/campaign-naive.log" 2>&1 </dev/null &
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
      # A fresh seed every session: a fixed one hid gemm_tc's one-case-in-3,500 failure.
      rseed=${NVFP4_RUN_SEED:-$(date +%s%N)}
      rsec=${NVFP4_RUN_SECONDS:-150}
      step "nvfp4check run of every CUDA kernel, seed $rseed, $rsec s"
      timeout $((rsec + 120)) "$B/cli/nvfp4check" run --seed "$rseed" --seconds "$rsec" --kernel gemv_naive \
        --kernel gemm_naive --kernel gemv_fast --kernel gemm_tc --kernel cublaslt_nvfp4 \
        --report "$OUT/run.json" --case-dir "$OUT/cases" >"$OUT/run.log" 2>&1 || status=1
      tail -16 "$OUT/run.log"
      ;;
    honest)
      hsec=${NVFP4_HONEST_SECONDS:-120}
      step "honest CUDA variants through run, $hsec s in all"
      hargs=()
      for k in honest_cuda_warp_tree honest_cuda_atomic_split_k honest_cuda_fp16_dequant honest_cuda_fp64 \
               honest_cuda_mma_f16 honest_cuda_mma_split_k_bf16 honest_cuda_wgmma_f16; do hargs+=(--kernel "$k"); done
      timeout $((hsec + 120)) "$B/cli/nvfp4check" run --plugin "$B/mutation/honest/libnvfp4_honest.so" "${hargs[@]}" \
        --seconds "$hsec" --seed "${NVFP4_HONEST_SEED:-$(date +%s)}" --report "$OUT/honest.json" \
        --case-dir "$OUT/honest-cases" >"$OUT/honest.log" 2>&1 || status=1
      tail -12 "$OUT/honest.log"
      ;;
    throughput)
      step "throughput (cases/s by size class)"
      bargs=()
      [ -n "${NVFP4_BASELINE:-}" ] && bargs=(--baseline "$NVFP4_BASELINE")
      timeout 400 scripts/throughput-bench.sh --program "$B/cli/nvfp4check" --seconds "${NVFP4_THROUGHPUT_SECONDS:-6}" \
        --json "$OUT/throughput.jsonl" "${bargs[@]}" >"$OUT/throughput.log" 2>&1 || status=1
      tail -40 "$OUT/throughput.log"
      ;;
    python)
      step "the Python package's GPU tier"
      NVFP4CHECK_LIBRARY="$B/python/libnvfp4check_capi.so" NVFP4CHECK_PROGRAM="$B/cli/nvfp4check" \
        NVFP4CHECK_WRONG_PLUGIN="$B/mutation/libnvfp4_wrong_host_plugin.so" PYTHONPATH="$PWD/python" \
        timeout 500 python3 -m pytest -p no:cacheprovider -q -rs python/tests >"$OUT/python.log" 2>&1 || status=1
      tail -25 "$OUT/python.log"
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
      mseed=${NVFP4_MUTANTS_SEED:-1130}
      step "nvfp4check mutants, CUDA, seed $mseed, as declared and as if declaring the matrix-unit flag"
      timeout 300 "$B/cli/nvfp4check" mutants --memory cuda --seed "$mseed" --report "$OUT/mutants-cuda.json" \
        --case-dir "$OUT/mutant-cases" >"$OUT/mutants-cuda.log" 2>&1 || status=1
      grep -A40 "^mutant " "$OUT/mutants-cuda.log" | tail -30
      timeout 200 "$B/cli/nvfp4check" mutants --memory cuda --seed "$mseed" --no-weak --honest-cases 0 --as-matrix-unit \
        --report "$OUT/mutants-cuda-mma.json" --case-dir "$OUT/mutant-cases-mma" >"$OUT/mutants-cuda-mma.log" 2>&1
      grep -E "^killed|SURVIVED" "$OUT/mutants-cuda-mma.log" | tail -10
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
    grouped)
      step "grouped GEMM: grouped_gemm_tc against the byte floor and cuBLAS grouped FP16"
      timeout 400 "$B/bench/gpu/nvfp4_gpu_bench" --only grouped --no-small-checks --iters 30 \
        --out "$OUT/gpu_bench_grouped.json" >"$OUT/gpu_bench_grouped.log" 2>&1 || status=1
      grep -E "^(ok|FAIL)|grouped G=|median" "$OUT/gpu_bench_grouped.log" | tail -40
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
