#!/usr/bin/env bash
# The suite's throughput: cases per second of `nvfp4check run` by kernel and size class,
# with every check on, and where the time goes (the kernel's process, the reference, the rest),
# side by side with another build of the program (e.g. the previous main) in the same run.
#
# Usage: scripts/throughput-bench.sh [--program PATH] [--baseline PATH] [--seconds S] [--jobs N]
#                                    [--kernels a,b,...] [--json FILE]
#   --program   the nvfp4check to measure (default: build/default/cli/nvfp4check, or $NVFP4_BUILD's)
#   --baseline  another nvfp4check measured on the same shapes right after (optional)
#   --seconds   per kernel and shape (default 8)
#   --jobs      kernel processes per kernel (default: the program's own default); 1 is also measured
#   --kernels   default: host_gemv_fp32,host_gemm_fp32, plus gemv_naive,gemm_tc where a GPU is
# Size classes (multiply-adds): tiny <= 2^12, small <= 2^16, medium <= 2^22. The last lines are a
# table: kernel, class, shape, jobs, cases/s, and the share of time in the kernel's calls (what
# the worker reports), the reference, and the rest (generating, saving, judging, reports).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
prog=${NVFP4_BUILD:+$NVFP4_BUILD/cli/nvfp4check}
prog=${prog:-build/default/cli/nvfp4check}
baseline="" seconds=8 jobs="" kernels="" json=""
while [ $# -gt 0 ]; do
  case "$1" in
    --program) prog=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --kernels) kernels=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "throughput-bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$kernels" ]; then
  kernels=host_gemv_fp32,host_gemm_fp32
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then kernels=$kernels,gemv_naive,gemm_tc; fi
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=$(command -v python3)
rows="$tmp/rows.jsonl"
: >"$rows"

# shape for a kernel and class: GEMV kernels get n = 1.
shape_of() {
  local kernel=$1 class=$2
  case "$kernel" in *gemv*) case $class in tiny) echo 32x1x128 ;; small) echo 128x1x512 ;; medium) echo 1024x1x4096 ;; esac ;;
                    *) case $class in tiny) echo 16x16x16 ;; small) echo 32x16x128 ;; medium) echo 128x128x256 ;; esac ;; esac
}

measure() {  # program label kernel class jobs
  local program=$1 label=$2 kernel=$3 class=$4 j=$5 shape report
  shape=$(shape_of "$kernel" "$class")
  report="$tmp/r.json"
  rm -f "$report"
  local extra=()
  [ -n "$j" ] && extra=(--jobs "$j")
  # The baseline may not know --jobs: it then runs with its own default.
  if ! "$program" run --kernel "$kernel" --shape "$shape" --seconds "$seconds" --seed 1 --case-dir "$tmp/cases" \
       --report "$report" "${extra[@]}" >"$tmp/out.log" 2>&1; then
    [ -f "$report" ] || { echo "  $label $kernel $shape: no report"; tail -3 "$tmp/out.log"; return; }
  fi
  "$py" - "$report" "$label" "$kernel" "$class" "$shape" "${j:-default}" >>"$rows" <<'EOF'
import json, sys
report, label, kernel, cls, shape, jobs = sys.argv[1:]
k = json.load(open(report))["kernels"][0]
st = k.get("stage_seconds", {})
total = sum(st.values()) or 1.0
# Old reports name the kernel's calls "run 1", "run 2", "stale"; new ones "kernel".
kernel_s = st.get("kernel", 0) + sum(v for n, v in st.items() if n.startswith("run ") or n == "stale")
ref_s = st.get("reference", 0) + st.get("stale reference", 0)
print(json.dumps({"build": label, "kernel": kernel, "class": cls, "shape": shape, "jobs": jobs,
                  "cases": k["cases"], "seconds": k["seconds"], "verdict": k["verdict"],
                  "cases_per_s": k["cases"] / max(k["seconds"], 1e-9),
                  "kernel_share": kernel_s / total, "reference_share": ref_s / total,
                  "stages": st}))
EOF
}

IFS=, read -r -a klist <<<"$kernels"
for kernel in "${klist[@]}"; do
  for class in tiny small medium; do
    measure "$prog" this "$kernel" "$class" "$jobs"
    [ "${jobs:-x}" != 1 ] && measure "$prog" this "$kernel" "$class" 1
    [ -n "$baseline" ] && measure "$baseline" baseline "$kernel" "$class" ""
  done
done
[ -n "$json" ] && cp "$rows" "$json"
"$py" - "$rows" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'build':9} {'kernel':15} {'class':7} {'shape':12} {'jobs':>7} {'cases':>7} {'cases/s':>9} {'kernel%':>8} {'ref%':>6} verdict")
for r in rows:
    print(f"{r['build']:9} {r['kernel']:15} {r['class']:7} {r['shape']:12} {r['jobs']:>7} {r['cases']:>7} "
          f"{r['cases_per_s']:>9.1f} {100*r['kernel_share']:>7.1f}% {100*r['reference_share']:>5.1f}% {r['verdict']}")
EOF
