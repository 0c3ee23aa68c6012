#!/usr/bin/env bash
# A fuzz campaign: N libFuzzer workers sharing one corpus directory for a fixed time (one worker
# per GPU through CUDA_VISIBLE_DEVICES for CUDA kernels, or per core for host kernels), then the
# corpus is merged and minimized (-merge=1), every crash becomes a case file that is replayed
# with `nvfp4check replay`, and a summary gives executions per second, coverage, new corpus
# files and failures. Runs from any directory with a build folder made by the `fuzz` preset
# (it may have been carried to another machine: every path is given or relative).
#
# Usage: scripts/fuzz-campaign.sh [options]
#   --build DIR        build folder with fuzz/<target>_fuzzer and cli/nvfp4check (default
#                      build/fuzz-campaign where it has the fuzzer, else build/fuzz: the
#                      `fuzz-campaign` preset has no sanitizers and runs about 3x the executions)
#   --target NAME      kernel (default) | reference | case_file
#   --kernel NAMES     kernel(s) to check, comma-separated (NVFP4_FUZZ_KERNEL; default: all runnable)
#   --memory M         host | cuda: only the kernels in this memory (NVFP4_FUZZ_MEMORY)
#   --plugin PATHS     plugin(s) with kernels, ':'-separated (NVFP4_FUZZ_PLUGIN)
#   --gpus N           N workers, worker i on GPU i (CUDA_VISIBLE_DEVICES); N = all: every GPU
#   --workers N        N workers on the CPU (default: cores / 2, at least 1)
#   --seconds S | --minutes M   campaign length (default 60 s)
#   --out DIR          campaign folder (default fuzz-campaign-<target>-<UTC time>)
#   --seeds DIR        seed corpus, read only (default <repo>/corpus/<target>); --no-seeds: none
#   --seed S           base libFuzzer seed (default: from the clock; always printed)
#   --max-crashes N    restarts of a worker after a crash (default 3; a fixed bug is found again)
#   --timeout S        libFuzzer's per-input limit (default 60)
#   -- ARGS...         extra libFuzzer flags for every worker
#   --pack DEST        instead of a campaign: copy what a campaign needs from --build into DEST
#                      (fuzz/*_fuzzer, the demo plugin, cli/nvfp4check, and lib/ with the shared
#                      libraries outside glibc and CUDA), to carry to another machine and use
#                      there as --build DEST (DEST/lib goes on LD_LIBRARY_PATH by itself)
# Exit status: 0 nothing found, 1 failures found (case files listed), 2 bad usage or setup (a
# worker that never ran counts: it checked nothing); the status is also written to
# OUT/exit-status when the campaign is complete.
#
# Example (1 GPU, 10 minutes, every CUDA kernel):
#   scripts/fuzz-campaign.sh --build build/fuzz --gpus 1 --minutes 10 --memory cuda
set -uo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/.." && pwd)"
# shellcheck source=scripts/campaign-lib.sh
source "$script_dir/campaign-lib.sh"

build=""
target="kernel"
kernel=""
memory=""
plugin=""
gpus=""
workers=""
seconds=60
out=""
seeds=""
no_seeds=0
base_seed=""
max_crashes=3
timeout_s=60
extra=()
pack=""

usage() { sed -n '2,32p' "$0"; }
die() { echo "fuzz-campaign.sh: $*" >&2; exit 2; }
# An option's value: never the next option (`--kernel --seconds 5` is a missing kernel name).
need_value() {
  [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"
  [[ "$2" != --* ]] || die "$1 needs a value, not the option $2 (see --help)"
}
is_count() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
# Whether $1 is a whole number of at most $2 (both below 2^62): shell arithmetic wraps past 2^63,
# and libFuzzer's -seed and -max_total_time are 32-bit.
at_most() { [[ "$1" =~ ^[0-9]+$ && ${#1} -le 18 ]] && (( 10#$1 <= $2 )); }
kMaxSeconds=2147483647

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) need_value "$@"; build="$2"; shift 2 ;;
    --target) need_value "$@"; target="$2"; shift 2 ;;
    --kernel) need_value "$@"; kernel="$2"; shift 2 ;;
    --memory) need_value "$@"; memory="$2"; shift 2 ;;
    --plugin) need_value "$@"; plugin="$2"; shift 2 ;;
    --gpus) need_value "$@"; gpus="$2"; shift 2 ;;
    --workers) need_value "$@"; workers="$2"; shift 2 ;;
    --seconds) need_value "$@"; seconds="$2"; shift 2 ;;
    --minutes) need_value "$@"; is_count "$2" && at_most "$2" $(( kMaxSeconds / 60 )) ||
                 die "--minutes needs a positive integer of at most $(( kMaxSeconds / 60 ))"
               seconds=$(( 10#$2 * 60 )); shift 2 ;;
    --out) need_value "$@"; out="$2"; shift 2 ;;
    --seeds) need_value "$@"; seeds="$2"; shift 2 ;;
    --no-seeds) no_seeds=1; shift ;;
    --seed) need_value "$@"; base_seed="$2"; shift 2 ;;
    --max-crashes) need_value "$@"; max_crashes="$2"; shift 2 ;;
    --timeout) need_value "$@"; timeout_s="$2"; shift 2 ;;
    --pack) need_value "$@"; pack="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

case "$target" in kernel|reference|case_file) ;; *) die "--target must be kernel, reference or case_file" ;; esac
case "$memory" in ""|host|cuda) ;; *) die "--memory must be host or cuda" ;; esac
is_count "$seconds" && at_most "$seconds" $kMaxSeconds || die "--seconds needs a positive integer of at most $kMaxSeconds"
[[ "$max_crashes" =~ ^[0-9]+$ ]] || die "--max-crashes needs a non-negative integer"
is_count "$timeout_s" || die "--timeout needs a positive integer"
[[ -z "$base_seed" ]] && base_seed=$(( $(date +%s) % 1000000 ))
# Worker w's run r uses seed + 1000 w + r, which must stay a 32-bit libFuzzer seed.
at_most "$base_seed" 4000000000 || die "--seed needs a non-negative integer of at most 4000000000 (libFuzzer's seeds are 32-bit)"

[[ -n "$build" ]] || build=$(campaign_fuzz_build . "$target")
if [[ -n "$pack" ]]; then
  [[ -d "$build/fuzz" ]] || die "no build folder at $build"
  mkdir -p "$pack/fuzz" "$pack/cli" "$pack/lib" || die "cannot create $pack"
  shopt -s nullglob
  files=("$build"/fuzz/*_fuzzer "$build"/fuzz/libnvfp4_broken_k_tail.so "$build"/cli/nvfp4check)
  for f in "${files[@]}"; do
    if [[ ! -f "$f" ]]; then
      echo "fuzz-campaign.sh: warning: no $f (build it first); packing without it" >&2
      continue
    fi
    rel="${f#"$build"/}"
    cp "$f" "$pack/$rel" || die "cannot copy $f"
    # Libraries the other machine may lack (fmt, libpng, LLVM's OpenMP): all but the C and C++
    # runtimes and CUDA's. The driver's and the toolkit's must match that machine; a carried
    # libstdc++ would need this machine's glibc (2.36) and shadow a working one there.
    ldd "$f" | awk '/=> \// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libgcc_s.so*|libstdc++.so*|libz.so*|ld-linux*|libcuda.so*|libcudart.so*|libcublas*.so*|libnvidia*) ;;
        *) cp -L -n "$lib" "$pack/lib/" ;;
      esac
    done
  done
  echo "packed into $pack ($(du -sh "$pack" | cut -f1)):"
  (cd "$pack" && find . -type f | sort)
  exit 0
fi

fuzzer="$build/fuzz/${target}_fuzzer"
nvfp4check="$build/cli/nvfp4check"
[[ -d "$build/lib" ]] && export LD_LIBRARY_PATH="$(cd "$build/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -x "$fuzzer" ]] || die "no fuzzer at $fuzzer (build the \`fuzz-campaign\` preset, or \`fuzz\` for ASan: cmake --preset fuzz-campaign && cmake --build build/fuzz-campaign)"
# libFuzzer's flag table is in the binary; the replay-only build has none.
grep -aq "max_total_time" "$fuzzer" ||
  die "$fuzzer is a replay-only build (no libFuzzer): configure with -DNVFP4_FUZZ=ON (preset fuzz)"
if [[ "$target" != kernel && ( -n "$kernel" || -n "$plugin" || -n "$memory" ) ]]; then
  die "--kernel, --memory and --plugin only apply to --target kernel"
fi

# Workers: one per GPU, or per pair of cores (a worker's OpenMP reference and kernel use two).
gpu_ids=()
if [[ -n "$gpus" ]]; then
  [[ "$gpus" == all || "$gpus" =~ ^[1-9][0-9]*$ ]] || die "--gpus needs a count or 'all'"
  if command -v nvidia-smi >/dev/null 2>&1; then
    while IFS= read -r id; do
      id="${id//[[:space:]]/}"
      [[ "$id" =~ ^[0-9]+$ ]] && gpu_ids+=("$id")
    done < <(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null || true)
  fi
  [[ ${#gpu_ids[@]} -gt 0 ]] || die "--gpus given but nvidia-smi lists no GPU"
  if [[ "$gpus" != all ]]; then
    [[ "$gpus" -le ${#gpu_ids[@]} ]] || die "--gpus $gpus but only ${#gpu_ids[@]} GPU(s) here"
    gpu_ids=("${gpu_ids[@]:0:$gpus}")
  fi
  n_workers=${#gpu_ids[@]}
  [[ -n "$workers" ]] && die "give --gpus or --workers, not both"
else
  cores=$(nproc 2>/dev/null || echo 2)
  n_workers=${workers:-$(( cores / 2 > 0 ? cores / 2 : 1 ))}
  is_count "$n_workers" || die "--workers needs a positive integer"
fi
cores=$(nproc 2>/dev/null || echo 2)
threads_per_worker=$(( cores / n_workers > 0 ? cores / n_workers : 1 ))

if [[ $no_seeds -eq 1 ]]; then
  seeds=""
elif [[ -z "$seeds" ]]; then
  seeds="$repo_root/corpus/$target"
fi
[[ -z "$seeds" || -d "$seeds" ]] || die "no seed corpus at $seeds"

[[ -z "$out" ]] && out="fuzz-campaign-$target-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$out/corpus" "$out/crashes" "$out/cases" "$out/logs" || die "cannot create $out"

# protect_shadow_gap=0: CUDA maps memory inside ASan's shadow gap. On GPUs leak checks are off:
# the driver's own allocations are not all visible to LeakSanitizer and would end the run with
# false reports; host campaigns keep them.
asan="protect_shadow_gap=0"
[[ ${#gpu_ids[@]} -gt 0 ]] && asan+=":detect_leaks=0"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}$asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
export OMP_NUM_THREADS="$threads_per_worker"
export NVFP4_FUZZ_CASE_DIR="$out/cases"
[[ -n "$kernel" ]] && export NVFP4_FUZZ_KERNEL="$kernel"
[[ -n "$memory" ]] && export NVFP4_FUZZ_MEMORY="$memory"
[[ -n "$plugin" ]] && export NVFP4_FUZZ_PLUGIN="$plugin"
# libFuzzer's RSS limit counts the CUDA context and ASan's shadow: generous on GPUs.
rss_mb=2560
[[ ${#gpu_ids[@]} -gt 0 ]] && rss_mb=16384

where="$n_workers worker(s) on the CPU, $threads_per_worker thread(s) each"
[[ ${#gpu_ids[@]} -gt 0 ]] && where="$n_workers worker(s) on GPU(s) ${gpu_ids[*]}"
echo "== fuzz campaign: target $target${kernel:+, kernel(s) $kernel}${plugin:+, plugin $plugin}"
echo "   $where, ${seconds} s, base seed $base_seed, folder $out"
echo "   seeds: ${seeds:-none}; shared corpus: $out/corpus"

seed_count=0
[[ -n "$seeds" ]] && seed_count=$(find "$seeds" -type f ! -name '*.md' | wc -l)
start=$(date +%s)
end=$(( start + seconds ))

# One worker: libFuzzer until the time is up, restarted after a crash (at most max_crashes
# times). New inputs go to the shared corpus (libFuzzer rereads it every second: -reload=1).
run_worker() {
  local w=$1 run=0 crashes=0 now remaining rc
  local log="$out/logs/worker-$w.log"
  : > "$log"
  while :; do
    now=$(date +%s)
    remaining=$(( end - now ))
    [[ $remaining -le 0 ]] && break
    local seed=$(( base_seed + 1000 * w + run ))
    echo "== worker $w run $run: seed $seed, $remaining s" >> "$log"
    touch "$log.run"
    (
      [[ ${#gpu_ids[@]} -gt 0 ]] && export CUDA_VISIBLE_DEVICES="${gpu_ids[$w]}"
      exec "$fuzzer" -seed="$seed" -max_total_time="$remaining" -timeout="$timeout_s" \
        -rss_limit_mb="$rss_mb" -print_final_stats=1 -reload=1 \
        -artifact_prefix="$out/crashes/w$w-" "${extra[@]}" "$out/corpus" ${seeds:+"$seeds"}
    ) >> "$log" 2>&1
    rc=$?
    run=$(( run + 1 ))
    [[ $rc -eq 0 ]] && break
    if [[ $rc -eq 4 || $rc -eq 2 ]]; then  # the kernel fuzzer's "cannot run here" and "bad setting"
      echo "== worker $w: the fuzzer could not start (exit $rc), see above" >> "$log"
      break
    fi
    if ! campaign_left_artifact "$out/crashes/w$w-" "$log.run"; then
      echo "== worker $w: the fuzzer exited $rc without an artifact: not a finding, and the worker stops (see above)" >> "$log"
      break
    fi
    crashes=$(( crashes + 1 ))
    echo "== worker $w: exit $rc (crash $crashes)" >> "$log"
    [[ $crashes -gt $max_crashes ]] && break
  done
}

pids=()
for (( w = 0; w < n_workers; ++w )); do
  run_worker "$w" &
  pids+=($!)
done
# Ctrl-C stops the workers (their process ids only) and still summarizes what was found.
trap 'echo "interrupted: stopping workers" >&2; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' INT TERM
for p in "${pids[@]}"; do wait "$p"; done
trap - INT TERM
elapsed=$(( $(date +%s) - start ))

# ---- Merge and minimize the corpus: the smallest set of inputs with the same coverage. ----
merge_env=()
[[ ${#gpu_ids[@]} -gt 0 ]] && merge_env=(env CUDA_VISIBLE_DEVICES="${gpu_ids[0]}")
mkdir -p "$out/merged"
# Inputs that crash here are the workers' findings again: their artifacts go to logs/, not the cwd.
"${merge_env[@]}" "$fuzzer" -merge=1 -timeout="$timeout_s" -rss_limit_mb="$rss_mb" -artifact_prefix="$out/logs/merge-" \
  "$out/merged" ${seeds:+"$seeds"} "$out/corpus" > "$out/logs/merge.log" 2>&1 ||
  echo "warning: merge failed (see $out/logs/merge.log)" >&2
# Coverage of the minimized corpus, as libFuzzer counts it (edges "cov", features "ft").
"${merge_env[@]}" "$fuzzer" -runs=0 -artifact_prefix="$out/logs/coverage-" "$out/merged" > "$out/logs/coverage.log" 2>&1 || true
coverage=$(grep -E "INITED|DONE" "$out/logs/coverage.log" | tail -1 | grep -oE "cov: [0-9]+ ft: [0-9]+" || echo "cov: ? ft: ?")

# New corpus files: merged inputs whose content is not a seed's.
seed_hashes="$out/logs/seed-hashes.txt"
: > "$seed_hashes"
[[ -n "$seeds" ]] && find "$seeds" -type f ! -name '*.md' -exec sha1sum {} + | cut -c1-40 | sort -u > "$seed_hashes"
merged_count=$(find "$out/merged" -type f | wc -l)
new_files=()
while IFS= read -r f; do
  h=$(sha1sum "$f" | cut -c1-40)
  grep -qx "$h" "$seed_hashes" || new_files+=("$f")
done < <(find "$out/merged" -type f | sort)

# ---- Per-worker statistics from libFuzzer's final stats (summed over restarts). ----
total_execs=0
summary="$out/summary.txt"
{
  echo "fuzz campaign: target $target${kernel:+, kernel(s) $kernel}${plugin:+, plugin $plugin}"
  echo "workers: $where; $elapsed s; base seed $base_seed"
  printf "%-8s %12s %10s %9s %8s\n" worker execs exec/s new-units crashes
} > "$summary"
for (( w = 0; w < n_workers; ++w )); do
  log="$out/logs/worker-$w.log"
  execs=$(grep -oE "stat::number_of_executed_units:[[:space:]]+[0-9]+" "$log" | awk '{s += $2} END {print s + 0}')
  units=$(grep -oE "stat::new_units_added:[[:space:]]+[0-9]+" "$log" | awk '{s += $2} END {print s + 0}')
  crashes=$(grep -c "^== worker $w: exit" "$log")
  total_execs=$(( total_execs + execs ))
  rate=$(( elapsed > 0 ? execs / elapsed : 0 ))
  printf "%-8s %12s %10s %9s %8s\n" "$w" "$execs" "$rate" "$units" "$crashes" >> "$summary"
done
total_rate=$(( elapsed > 0 ? total_execs / elapsed : 0 ))
{
  echo "total: $total_execs executions, $total_rate exec/s"
  echo "coverage of the merged corpus: $coverage"
  echo "corpus: $seed_count seed file(s); merged corpus $merged_count file(s) in $out/merged, ${#new_files[@]} new"
} >> "$summary"

# ---- Every crash artifact -> case file(s) -> nvfp4check replay (scripts/campaign-lib.sh). ----
campaign_env=("${merge_env[@]}")
campaign_replay_crashes "$target" "$fuzzer" "$nvfp4check" "$out/crashes" "$out/cases" "$summary"
failures=$campaign_failures
if [[ ${#new_files[@]} -gt 0 ]]; then
  echo "new corpus files (add regressions with: cp FILE $repo_root/corpus/$target/):" >> "$summary"
  printf '  %s\n' "${new_files[@]:0:20}" >> "$summary"
  [[ ${#new_files[@]} -gt 20 ]] && echo "  ... and $(( ${#new_files[@]} - 20 )) more in $out/merged" >> "$summary"
fi

not_run=$(grep -l "^== worker [0-9]*: the fuzzer could not start\|^== worker [0-9]*: the fuzzer exited .* without an artifact" \
  "$out"/logs/worker-*.log 2>/dev/null | wc -l)
[[ $not_run -gt 0 ]] && echo "workers that stopped without running to the end: $not_run of $n_workers (their logs in $out/logs)" >> "$summary"
[[ $total_execs -eq 0 ]] && echo "no executions: nothing was checked" >> "$summary"
cat "$summary"
status=0
[[ $not_run -gt 0 || $total_execs -eq 0 ]] && status=2
[[ $failures -gt 0 ]] && status=1
# A marker for whoever waits on a campaign started in the background (setsid ... &).
echo "$status" > "$out/exit-status"
exit "$status"
