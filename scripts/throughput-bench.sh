#!/usr/bin/env bash
# The suite's throughput: cases per second of `nvfp4check run` by kernel and size class,
# with every check on, and where the time goes (the kernel's process, the reference, the rest),
# side by side with another build of the program (e.g. the previous main) in the same run.
#
# Usage: scripts/throughput-bench.sh [--program PATH] [--baseline PATH] [--seconds S] [--jobs N]
#                                    [--baseline-jobs N] [--kernels a,b,...] [--classes c,...]
#                                    [--repeat R] [--json FILE] [--no-variants]
#   --program   the nvfp4check to measure (default: build/default/cli/nvfp4check, or $NVFP4_BUILD's)
#   --baseline  another nvfp4check measured on the same shapes right after (optional)
#   --seconds   per kernel and shape (default 8)
#   --jobs      kernel processes per kernel (default: the program's own default); 1 is also measured
#   --baseline-jobs  the baseline's kernel processes, where they differ from --jobs: with the same
#               program as the baseline, one lane count beside another in alternation, on one host
#   --no-variants  only the rows at --jobs (or the default): no 1-lane row and no "this-own" row
#   --json      each row as one JSON line, appended to FILE
#   --kernels   default: host_gemv_fp32,host_gemm_fp32, plus gemv_naive,gemm_tc where a GPU is
#   --classes   default: tiny,small,medium
#   --repeat    each row R times, the program and the baseline in alternation (default 1); the
#               table shows the median, and with a baseline the ratio to its median, marked
#               SLOWER below 0.9. A regression of the runner shows so on a loaded 2-core machine:
#                 scripts/throughput-bench.sh --program build/gpu/cli/nvfp4check --baseline OLD \
#                     --kernels host_gemv_fp32 --classes small --jobs 1 --seconds 4 --repeat 5
# Size classes (multiply-adds): tiny <= 2^12, small <= 2^16, medium <= 2^22; `schedule`: no
# --shape, the kernel's default mixed schedule (seed 1), shape "drawn". The last lines are a
# table: kernel, op, class, shape, jobs, cases/s, and where the lanes' time went (the report's
# stage_seconds, adding up to 100%): the kernel's calls, the buffers in its process, the channel
# to it, the reference, the data (drawing and generating), judging, saving, starting the
# kernel's process, and the rest
# (listeners and what no step holds); then "ms/case", the lanes' time a case (the stages'
# seconds over the cases: one lane's cost of a case, under the load of the others), and
# "cores", the CPU seconds of the whole run (the program and its kernel processes) over its
# wall time (a row near the machine's cores is CPU-bound; one well below them waits on something
# else); "cpu-ms", in rows of 3 s or more, what a case costs the CPU in milliseconds, the runner's
# and its kernels' processes' (scripts/cpu-by-thread.py), or "-". A CUDA kernel's rows: "this" as
# `run` does by default (its lanes in one MPS context where MPS can start), "this-own" with
# --shared-context off (a context per lane), and with one lane; the report's "context" field says
# which it got. Before the rows, a line on the host: its CPU, its cores and its speed
# (bench/case_work_bench's exact reference on one thread, in every row as host_reference_us),
# since hosts of the same GPU machine differ.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
prog=${NVFP4_BUILD:+$NVFP4_BUILD/cli/nvfp4check}
prog=${prog:-build/default/cli/nvfp4check}
baseline="" seconds=8 jobs="" baseline_jobs="" kernels="" json="" classes=tiny,small,medium repeat=1 variants=1
while [ $# -gt 0 ]; do
  case "$1" in
    --program) prog=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --baseline-jobs) baseline_jobs=$2; shift 2 ;;
    --kernels) kernels=$2; shift 2 ;;
    --classes) classes=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --no-variants) variants=0; shift ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
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

# The host's speed, printed first and kept in every row: loans of the same GPU machine came with
# hosts a factor of 1.7 apart on every CPU-bound stage (bench/THROUGHPUT.md, 6 December 2026), so
# rows of two runs compare only through it. It is the exact reference of grouped_gemm_tc's first
# 200 schedule cases on one thread (bench/case_work_bench beside the program's build), us a case.
# A program with no build around it (a variant binary carried alone) is measured with the
# baseline's build's bench, else $NVFP4_BUILD's, and the line names which: its code may differ.
host_model=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
own_bench="$(dirname "$prog")/../bench/case_work_bench" host_bench="" host_us=""
for b in "$own_bench" ${baseline:+"$(dirname "$baseline")/../bench/case_work_bench"} \
         ${NVFP4_BUILD:+"$NVFP4_BUILD/bench/case_work_bench"}; do
  if [ -x "$b" ]; then host_bench=$b; break; fi
done
if [ -n "$host_bench" ]; then
  host_us=$(timeout 120 "$host_bench" --benchmark_filter='kernel:0/step:1/threads:1/' 2>/dev/null |
    awk '/^BM_CaseWork/ {print $2; exit}')
fi
if [ -n "$host_us" ]; then
  which="bench/case_work_bench"
  [ "$host_bench" = "$own_bench" ] || which="$host_bench: none beside $prog"
  echo "host: ${host_model:-unknown CPU}, $(nproc) cores; speed: grouped_gemm_tc's exact reference on one thread," \
    "$host_us us a case ($which; lower is faster)"
else
  echo "host: ${host_model:-unknown CPU}, $(nproc) cores; speed: not measured (no bench/case_work_bench beside $prog${baseline:+ or $baseline})"
fi
export NVFP4_HOST_REFERENCE_US=${host_us:-}
rows="$tmp/rows.jsonl"
: >"$rows"

# shape for a kernel and class: GEMV kernels get n = 1.
shape_of() {
  local kernel=$1 class=$2
  [ "$class" = schedule ] && { echo drawn; return; }
  case "$kernel" in *gemv*) case $class in tiny) echo 32x1x128 ;; small) echo 128x1x512 ;; medium) echo 1024x1x4096 ;; esac ;;
                    *) case $class in tiny) echo 16x16x16 ;; small) echo 32x16x128 ;; medium) echo 128x128x256 ;; esac ;; esac
}

# CPU ticks of this shell's waited-for children and their descendants (user + system).
children_ticks() { awk '{print $16 + $17}' /proc/$$/stat 2>/dev/null || echo 0; }
ticks_per_s=$(getconf CLK_TCK 2>/dev/null || echo 100)

measure() {  # program label kernel class jobs [more arguments of run]
  local program=$1 label=$2 kernel=$3 class=$4 j=$5 shape report
  local more=("${@:6}")
  shape=$(shape_of "$kernel" "$class")
  report="$tmp/r.json"
  rm -f "$report"
  local extra=()
  [ -n "$j" ] && extra=(--jobs "$j")
  # The baseline may not know --jobs: it then runs with its own default.
  local shape_args=(--shape "$shape")
  [ "$shape" = drawn ] && shape_args=()
  # Rows of 3 s or more also say what a case costs the CPU, in the runner and in the kernels'
  # processes (scripts/cpu-by-thread.py over the run's middle, its own processes only).
  local cpu="$tmp/cpu.json"
  rm -f "$cpu"
  run_it() {
    "$program" run --kernel "$kernel" "${shape_args[@]}" --seconds "$seconds" --seed 1 --case-dir "$tmp/cases" \
      --report "$report" "$@" >"$tmp/out.log" 2>&1 &
    local pid=$! sampler=""
    if awk -v s="$seconds" 'BEGIN { exit !(s >= 3) }'; then
      "$py" scripts/cpu-by-thread.py --pid "$pid" --wait 1 --seconds "$(awk -v s="$seconds" 'BEGIN { print s - 2 }')" \
        --json "$cpu" >/dev/null 2>&1 &
      sampler=$!
    fi
    wait "$pid"
    local rc=$?
    [ -n "$sampler" ] && wait "$sampler"
    return $rc
  }
  local wall0 cpu0 wall1 cpu1
  wall0=$(date +%s.%N) cpu0=$(children_ticks)
  if ! run_it "${extra[@]}" "${more[@]}" && [ ! -f "$report" ] && [ ${#extra[@]} -gt 0 ]; then run_it; fi
  wall1=$(date +%s.%N) cpu1=$(children_ticks)
  [ -f "$report" ] || { echo "  $label $kernel $shape: no report"; tail -3 "$tmp/out.log"; return; }
  "$py" - "$report" "$label" "$kernel" "$class" "$shape" "${j:-default}" "$cpu" \
    "$(awk -v a="$wall0" -v b="$wall1" -v c="$cpu0" -v d="$cpu1" -v t="$ticks_per_s" \
         'BEGIN {w = b - a; printf "%.6f", (w > 0 ? (d - c) / t / w : 0)}')" >>"$rows" <<'EOF'
import json, os, sys
report, label, kernel, cls, shape, jobs, cpu, cores = sys.argv[1:]
k = json.load(open(report))["kernels"][0]
rate = k["cases"] / max(k["seconds"], 1e-9)
# CPU milliseconds a case by process (None where the row was too short to sample).
cpu_ms = dict.fromkeys(("runner", "worker"))
if os.path.exists(cpu) and rate > 0:
    c = json.load(open(cpu))
    for role in cpu_ms:
        cpu_ms[role] = 1e3 * c["by_role"].get(role, 0.0) / c["seconds"] / rate
# "stage_seconds"; builds between 1 and 2 December 2026 wrote "step_seconds".
st = k.get("stage_seconds") or k.get("step_seconds") or {}
# Steps into the table's columns. The kernel's calls are "run 1", "run 2", "stale", "unsupported"
# ("kernel" in older reports: there it held the whole round trip to the kernel's process).
group = {"run 1": "kernel", "run 2": "kernel", "stale": "kernel", "unsupported": "kernel", "kernel": "kernel",
         "buffers": "buffers", "channel": "channel", "reference": "reference", "stale reference": "reference",
         "draw": "data", "generate": "data", "judge": "judge", "save": "save", "start": "start"}
columns = ["kernel", "buffers", "channel", "reference", "data", "judge", "save", "start", "rest"]
total = sum(st.values())
shares = dict.fromkeys(columns, 0.0)
for name, sec in st.items():
    # "buffers: lay-out", "buffers: upload", "buffers: read-back" (one "buffers" before 4 December 2026)
    shares[group.get(name.split(":")[0], "rest")] += sec / total if total > 0 else 0.0
by_op = k.get("drawn", {}).get("by_op", {})
print(json.dumps({"build": label, "kernel": kernel, "op": max(by_op, key=by_op.get) if by_op else "?",
                  "class": cls, "shape": shape, "jobs": jobs,
                  "cases": k["cases"], "seconds": k["seconds"], "verdict": k["verdict"],
                  "cases_per_s": rate, "context": k.get("context", ""),
                  "runner_cpu_ms": cpu_ms["runner"], "kernels_cpu_ms": cpu_ms["worker"],
                  "shares": shares, "stages": st,
                  "ms_per_case": 1e3 * total / max(k["cases"], 1), "cores": float(cores),
                  "host_reference_us": float(os.environ["NVFP4_HOST_REFERENCE_US"])
                  if os.environ.get("NVFP4_HOST_REFERENCE_US") else None}))
EOF
}

IFS=, read -r -a klist <<<"$kernels"
IFS=, read -r -a clist <<<"$classes"
for kernel in "${klist[@]}"; do
  for class in "${clist[@]}"; do
    for _ in $(seq "$repeat"); do
      measure "$prog" this "$kernel" "$class" "$jobs"
      if [ "$variants" = 1 ]; then
        [ "${jobs:-x}" != 1 ] && measure "$prog" this "$kernel" "$class" 1
        # A CUDA kernel's lanes share one MPS context by default where MPS can start: the same
        # build with a context per lane too (build "this-own").
        case "$kernel" in host_*) ;; *) [ "${jobs:-x}" != 1 ] && measure "$prog" this-own "$kernel" "$class" "$jobs" --shared-context off ;; esac
      fi
      [ -n "$baseline" ] && measure "$baseline" baseline "$kernel" "$class" "${baseline_jobs:-$jobs}"
    done
  done
done
# Appended: two runs given one file keep both runs' rows (one JSON object a line).
[ -n "$json" ] && cat "$rows" >>"$json"
"$py" - "$rows" "${jobs:-default}" "${baseline_jobs:-${jobs:-default}}" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
this_jobs, baseline_jobs = sys.argv[2:4]
columns = ["kernel", "buffers", "channel", "reference", "data", "judge", "save", "start", "rest"]
# One line per build, kernel, class and jobs: the median run of its repetitions.
groups = {}
for r in rows:
    groups.setdefault((r["kernel"], r["class"], r["jobs"], r["build"]), []).append(r)
def cpu_ms(r):  # "runner+kernels" CPU-ms a case, or "-" where not sampled
    if r.get("runner_cpu_ms") is None:
        return "-"
    return f"{r['runner_cpu_ms']:.2f}+{r['kernels_cpu_ms']:.2f}"
median = {}
for key, runs in groups.items():
    runs.sort(key=lambda r: r["cases_per_s"])
    median[key] = runs[len(runs) // 2]
print(f"{'build':9} {'kernel':15} {'op':5} {'class':8} {'shape':12} {'jobs':>7} {'runs':>4} {'cases':>7} {'cases/s':>9} "
      + " ".join(f"{c[:7] + '%':>8}" for c in columns)
      + f" {'ms/case':>8} {'cores':>5} {'cpu-ms':>13} verdict  vs baseline (this-own: vs this)")
for (kernel, cls, jobs, build), r in median.items():
    runs = groups[(kernel, cls, jobs, build)]
    # Like for like: "this" against the baseline's line (both in the program's default context
    # mode); "this-own" (a context per lane) against "this", not against the baseline.
    against = "baseline" if build == "this" else "this" if build == "this-own" else None
    # The baseline's line at its own lane count (--baseline-jobs) for this build's main line.
    base_jobs = baseline_jobs if against == "baseline" and jobs == this_jobs else jobs
    base = median.get((kernel, cls, base_jobs, against)) if against else None
    ratio = ""
    if base and base["cases_per_s"] > 0:
        x = r["cases_per_s"] / base["cases_per_s"]
        ratio = f"{x:.2f}x" + (" SLOWER" if x < 0.9 else "") + ("" if against == "baseline" else " of this")
    print(f"{build:9} {kernel:15} {r['op']:5} {cls:8} {r['shape']:12} {jobs:>7} {len(runs):>4} {r['cases']:>7} "
          f"{r['cases_per_s']:>9.1f} " + " ".join(f"{100 * r['shares'][c]:>7.1f}%" for c in columns)
          + f" {r.get('ms_per_case', 0):>8.3f} {r.get('cores', 0):>5.1f} {cpu_ms(r):>13} {r['verdict']:7}  {ratio}")
    if len(runs) > 1:
        print(f"{'':9} {'':15} {'':5} {'':8} {'':12} {'':>7} runs: " + ", ".join(f"{x['cases_per_s']:.1f}" for x in runs))
EOF
