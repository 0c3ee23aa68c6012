#!/usr/bin/env bash
# One GPU session's worth of issue-6 measurements, for the device machine: the correctness checks
# and timings of nvfp4_gpu_bench (JSON), compute-sanitizer memcheck and racecheck on the small
# checks, an ncu profile of each fast kernel (clocks left alone), and the SASS of the fast
# kernels. Everything lands in OUT_DIR; the table is printed last.
#
#   scripts/gpu-bench.sh BENCH_BINARY OUT_DIR [ITERS]
#
# Build the binary on any machine with nvcc (it links cudart statically, cuBLAS dynamically):
#   cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
#         -DNVFP4_TESTS=OFF && cmake --build build/gpu --target nvfp4_gpu_bench
set -u -o pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 BENCH_BINARY OUT_DIR [ITERS]" >&2
  exit 2
fi
bench=$1
out=$2
iters=${3:-100}
mkdir -p "$out"
[ -x "$bench" ] || { echo "$0: $bench is not an executable" >&2; exit 2; }
status=0

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv \
  > "$out/gpu.txt" 2>&1 || true
cat "$out/gpu.txt"

# 1. Checks, then timings (exit 1 on any mismatch).
"$bench" --out "$out/gpu_bench.json" --iters "$iters" 2>&1 | tee "$out/bench.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "nvfp4_gpu_bench exited $rc" >&2; status=1; }

# 2. Sanitizers on the small checks only (the big shapes would take minutes under them).
if command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bench" --checks-only --out "$out/sanitize_$tool.json" \
      > "$out/sanitize_$tool.log" 2>&1
    rc=$?
    echo "compute-sanitizer $tool: exit $rc ($(grep -c '^ok' "$out/sanitize_$tool.log") checks ok)" | tee -a "$out/summary.txt"
    tail -3 "$out/sanitize_$tool.log"
    [ "$rc" -eq 0 ] || status=1
  done
fi

# 3. One profiled launch of each fast kernel on the first benchmark shape of its kind.
if command -v ncu > /dev/null; then
  for which in gemv gemm; do
    kernel=$([ $which = gemv ] && echo gemv_fast_kernel || echo gemm_tc_kernel)
    timeout 120 ncu --clock-control none -k "regex:$kernel" -s 2 -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      "$bench" --only $which --iters 5 --no-small-checks --out "$out/ncu_$which.json" > "$out/ncu_$which.txt" 2>&1 || true
  done
fi

# 4. SASS of the fast kernels: instruction mix of the hot loops (16-byte loads, HMMA, HFMA2).
if command -v cuobjdump > /dev/null; then
  cuobjdump -sass "$bench" 2>/dev/null | awk '/Function : .*(gemv_fast_kernel|gemm_tc_kernel)/{on=1} /Function : /{if ($0 !~ /gemv_fast_kernel|gemm_tc_kernel/) on=0} on' \
    > "$out/fast_kernels.sass" || true
  grep -oE '^\s+/\*[0-9a-f]+\*/\s+[A-Z0-9_.]+' "$out/fast_kernels.sass" | awk '{print $2}' | sort | uniq -c | sort -rn \
    | head -40 > "$out/sass_mix.txt" || true
fi

echo
grep -A40 '^shape ' "$out/bench.log" || true
cat "$out/summary.txt" 2>/dev/null || true
exit $status
