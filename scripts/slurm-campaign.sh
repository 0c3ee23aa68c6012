#!/usr/bin/env bash
# A campaign across a Slurm cluster: a job array whose tasks each take one GPU (--gres=gpu:1) or
# a share of a node's cores, running either shards of one `nvfp4check run` (--mode run: task I is
# `run --shard I/N`) or libFuzzer workers of the kernel fuzzer over one corpus directory (--mode
# fuzz); then a job that depends on the array (--dependency=afterany) writes DIR/summary.txt: per
# task its Slurm state, device and time, then in run mode the program's account (`nvfp4check merge
# --summary`: each shard's cases/s, the merged report, every shard's first failure replayed through
# its own reproduce line, the verdict), in fuzz mode the corpus merged (-merge=1), exec/s, coverage
# and every crash turned into case files and replayed with the kernel and plugin that found it.
# Arguments every task would refuse are refused at submit (exit 2). DIR must be on a file system
# every node sees (docs/CAMPAIGNS.md).
#
# Usage:
#   scripts/slurm-campaign.sh submit --dir DIR [campaign options] [Slurm options]
#   scripts/slurm-campaign.sh summary DIR      the last round's summary and its status
# Campaign options (fixed by the first submit; a resubmit of DIR gives only Slurm options):
#   --mode run|fuzz      sharded `nvfp4check run` (default) or kernel-fuzzer workers
#   --tasks N            array size: N shards or N workers (default 2)
#   --kernel NAME        kernel to check (repeatable; default every runnable kernel)
#   --memory host|cuda   only the kernels in this memory (with --kernel: among those named)
#   --plugin PATH        plugin with kernels (repeatable)
#   --seed S             run: the schedule's seed; fuzz: the base libFuzzer seed (default: clock, printed)
#   --cases C            run: check the schedule's indices below C between the shards
#   --seconds S          run: seconds per shard (default 60 without --cases); fuzz: per worker
#   --jobs J             run: kernel processes per task (default nvfp4check run's: three quarters of
#                        the task's CPUs per GPU, at least 2, at most 12)
#   --build DIR          build folder: cli/nvfp4check, and fuzz/kernel_fuzzer built with libFuzzer
#                        for fuzz mode (default build/default, or for fuzz mode build/fuzz-campaign
#                        where it has the fuzzer, else build/fuzz)
#   --seeds DIR          fuzz: read-only seed corpus (default corpus/kernel; --no-seeds: none)
# Slurm options:
#   --gpus-per-task G    --gres=gpu:G per task: 1 for CUDA kernels (default 0: host kernels)
#   --cpus-per-task C    --cpus-per-task=C (default 1 without GPUs)
#   --time MINUTES       time limit of each task (default: the campaign's seconds + 10 minutes)
#   --partition P        --account A      passed to sbatch
#   --sbatch-arg ARG     any other sbatch argument for the array (repeatable, e.g. --sbatch-arg=--hold)
#   --wait               wait for the finishing job, print the summary, exit with its status
#   --local [GPU,...]    no Slurm: run the same tasks here (tasks of one GPU one after another on
#                        the GPUs listed, or per group of cores), then the same finish
# Resubmitting the same DIR continues: fuzz mode starts from DIR/corpus (the merged corpus of the
# rounds before); run mode runs only the shards that have no report yet (cancelled, timed out,
# failed to start), so the merge is complete once every shard has run once.
# Exit status (also DIR/rounds/R/exit-status): 0 every task completed and nothing failed;
# 1 a failure was found (listed, with replays); 3 incomplete: a task was cancelled, timed out or
# lost (never a pass, whatever sacct's ExitCode says), resubmit DIR; 2 bad usage or setup.
set -uo pipefail

script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
script_dir=$(dirname "$script")
repo_root=$(cd "$script_dir/.." && pwd)
# shellcheck source=scripts/campaign-lib.sh
source "$script_dir/campaign-lib.sh"

die() { echo "slurm-campaign.sh: $*" >&2; exit 2; }
is_count() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
now() { date +%s.%N; }

# ---- The campaign's settings: DIR/campaign.conf, written once. ----
load_conf() {
  local dir=$1
  [[ -f "$dir/campaign.conf" ]] || die "$dir holds no campaign (no campaign.conf)"
  memory=""  # a campaign written before --memory existed has none
  # shellcheck source=/dev/null
  source "$dir/campaign.conf"
  nvfp4check="$build/cli/nvfp4check"
  fuzzer="$build/fuzz/kernel_fuzzer"
  [[ -d "$build/lib" ]] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  return 0
}

# Environment of the kernel fuzzer (workers, merge, export), as fuzz-campaign.sh sets it.
fuzz_env() {
  local IFS
  IFS=,; [[ ${#kernels[@]} -gt 0 ]] && export NVFP4_FUZZ_KERNEL="${kernels[*]}"
  [[ -n "$memory" ]] && export NVFP4_FUZZ_MEMORY="$memory"
  IFS=:; [[ ${#plugins[@]} -gt 0 ]] && export NVFP4_FUZZ_PLUGIN="${plugins[*]}"
  local asan="protect_shadow_gap=0"
  [[ $gpus_per_task -gt 0 ]] && asan+=":detect_leaks=0"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}$asan"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
  rss_mb=2560
  [[ $gpus_per_task -gt 0 ]] && rss_mb=16384
  return 0
}

# ---- One array task: `run --shard I/N`, or a libFuzzer worker until its time is up. ----
task_main() {
  local round=$1 dir i rec log rc=0
  dir=$(cd "$round/../.." && pwd)
  load_conf "$dir"
  i=${SLURM_ARRAY_TASK_ID:-${NVFP4_CAMPAIGN_TASK:?not an array task}}
  rec="$round/tasks/$i"
  log="$round/logs/task-$i.log"
  {
    echo "task=$i"
    echo "job=${SLURM_ARRAY_JOB_ID:-local}_${SLURM_ARRAY_TASK_ID:-$i}"
    echo "host=$(hostname)"
    echo "cuda_visible_devices=${CUDA_VISIBLE_DEVICES:-}"
    echo "slurm_job_gpus=${SLURM_JOB_GPUS:-}"
    echo "start=$(now)"
  } > "$rec.start"
  if [[ $mode == run ]]; then
    local args=(run --seed "$seed" --shard "$i/$tasks" --report "$dir/reports/.shard-$i.json.part"
                --case-dir "$dir/cases/shard-$i")
    local k p
    for k in "${kernels[@]}"; do args+=(--kernel "$k"); done
    for p in "${plugins[@]}"; do args+=(--plugin "$p"); done
    [[ -n "$memory" ]] && args+=(--memory "$memory")
    [[ -n "$cases" ]] && args+=(--cases "$cases")
    [[ -n "$seconds" ]] && args+=(--seconds "$seconds")
    [[ -n "$jobs" ]] && args+=(--jobs "$jobs")
    echo "== task $i: nvfp4check ${args[*]}" > "$log"
    "$nvfp4check" "${args[@]}" >> "$log" 2>&1
    rc=$?
    # Only a finished run leaves a shard report: a killed one leaves none to be merged as if whole.
    [[ $rc -le 1 ]] && mv "$dir/reports/.shard-$i.json.part" "$dir/reports/shard-$i.json"
  else
    fuzz_env
    export NVFP4_FUZZ_CASE_DIR="$round/cases/task-$i"
    export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"
    local end run=0 crashes=0 remaining wseed
    end=$(( $(date +%s) + seconds ))
    : > "$log"
    while :; do
      remaining=$(( end - $(date +%s) ))
      [[ $remaining -le 0 ]] && break
      wseed=$(( seed + 100000 * ${round##*/} + 1000 * i + run ))
      echo "== task $i run $run: seed $wseed, $remaining s" >> "$log"
      touch "$log.run"
      "$fuzzer" -seed="$wseed" -max_total_time="$remaining" -timeout="$fuzz_timeout" -rss_limit_mb="$rss_mb" \
        -print_final_stats=1 -reload=1 -artifact_prefix="$round/crashes/task-$i-" \
        "$dir/corpus" ${seeds:+"$seeds"} >> "$log" 2>&1
      rc=$?
      run=$(( run + 1 ))
      [[ $rc -eq 0 ]] && break
      # The kernel fuzzer's "nothing chosen can run here" and "bad setting".
      [[ $rc -eq 4 || $rc -eq 2 ]] && { echo "== task $i: the fuzzer could not start (exit $rc)" >> "$log"; break; }
      if ! campaign_left_artifact "$round/crashes/task-$i-" "$log.run"; then
        echo "== task $i: the fuzzer exited $rc without an artifact: not a finding, and the task failed (its last lines above)" >> "$log"
        rc=3
        break
      fi
      crashes=$(( crashes + 1 ))
      echo "== task $i: exit $rc (crash $crashes)" >> "$log"
      rc=0  # a crash is a finding (its artifact is in crashes/), not a failed task
      [[ $crashes -gt $max_crashes ]] && break
    done
  fi
  echo "rc=$rc end=$(now)" > "$rec.end"
  # The task completed when the check ran to its end, whatever it found (the verdict is in the
  # report or the crashes); exit 2 (bad usage, a fuzzer that cannot start) is a failed task.
  [[ $rc -le 1 ]] && exit 0
  exit "$rc"
}

# ---- State of array task I: sacct where accounting is on, else scontrol (MinJobAge). ----
slurm_state() {
  local array=$1 i=$2 s=""
  [[ -f "$round/tasks/$i.state" ]] && { cat "$round/tasks/$i.state"; return; }  # --local
  [[ "$array" == local ]] && return
  if command -v sacct >/dev/null 2>&1; then
    s=$(sacct -n -X -P -j "${array}_$i" -o State 2>/dev/null | head -1 | awk '{print $1}')
  fi
  # Accounting lags a job's end by a moment, or is off (then sacct prints nothing).
  case "$s" in ""|PENDING|RUNNING|COMPLETING|REQUEUED|RESIZING|SUSPENDED)
    s=$(scontrol show job -o "${array}_$i" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -1 | cut -d= -f2)
    # An unstarted element shows the array's pending record under its own id: not its state.
    scontrol show job -o "${array}_$i" 2>/dev/null | grep -q "ArrayTaskId=$i " || s=""
  esac
  echo "$s"
}

field_of() { sed -n "s/^$2=//p" "$1" 2>/dev/null | head -1; }

# ---- The job after the array: merge, replay, summary. ----
finish_main() {
  local round=$1 dir array summary status=0 incomplete=0 found=0 r
  dir=$(cd "$round/../.." && pwd)
  load_conf "$dir"
  array=$(cat "$round/array-job")
  r=${round##*/}
  summary="$round/summary.txt"
  local -a ids
  read -r -a ids < "$round/task-ids"
  {
    echo "nvfp4check campaign: $mode mode, $tasks task(s), round $r, seed $seed"
    echo "kernels: ${kernels[*]:-every runnable one}${memory:+ in $memory memory}${plugins[*]:+; plugins: ${plugins[*]}}"
    echo "directory: $dir; array job $array"
    printf "%-5s %-12s %-11s %-8s %9s %10s %10s  %s\n" task job state device seconds work rate found
  } > "$summary"
  local i state start end rc dev secs work rate note
  declare -A task_state=()
  for i in "${ids[@]}"; do
    state=$(slurm_state "$array" "$i")
    start=$(field_of "$round/tasks/$i.start" start)
    end=$(sed -n 's/.*end=//p' "$round/tasks/$i.end" 2>/dev/null)
    rc=$(sed -n 's/^rc=\([0-9]*\).*/\1/p' "$round/tasks/$i.end" 2>/dev/null)
    dev=$(field_of "$round/tasks/$i.start" cuda_visible_devices)
    # Only a COMPLETED task with its own exit record counts; sacct says 0:0 for a cancelled one.
    if [[ -z "$state" && -n "$rc" ]]; then state=COMPLETED; note="(no Slurm record left; the task's own record)"
    elif [[ -z "$state" && -z "$start" ]]; then state=NOT_RUN; note="no Slurm record and never started: cancelled before it ran?"
    elif [[ -z "$state" ]]; then state=LOST; note="started, but no exit record and no Slurm record"
    elif [[ "$state" == COMPLETED && -z "$rc" ]]; then state=LOST; note="Slurm says COMPLETED but the task left no exit record"
    else note=""
    fi
    [[ "$state" == FAILED && -n "$rc" ]] && note="exit $rc: see $round/logs/task-$i.log"
    task_state[$i]=$state
    [[ "$state" != COMPLETED ]] && incomplete=1
    secs="-"
    [[ -n "$start" && -n "$end" ]] && secs=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
    work="-" rate="-"
    # Run mode: each shard's cases and rate come with the merge's summary below.
    if [[ $mode == fuzz && -f "$round/logs/task-$i.log" ]]; then
      work=$(grep -oE "stat::number_of_executed_units:[[:space:]]+[0-9]+" "$round/logs/task-$i.log" | awk '{s += $2} END {print s + 0}')
      [[ "$secs" != "-" ]] && rate=$(awk -v e="$work" -v s="$secs" 'BEGIN {if (s > 0) printf "%.1f", e / s; else print "-"}')
      work="$work execs" rate="$rate/s"
    fi
    printf "%-5s %-12s %-11s %-8s %9s %10s %10s  %s\n" "$i" "$(field_of "$round/tasks/$i.start" job)" "$state" \
      "${dev:--}" "$secs" "$work" "$rate" "$note" >> "$summary"
  done

  if [[ $mode == run ]]; then
    # The program gives the account: each shard's work, the merge, every shard's first failure
    # replayed through its own reproduce line, and the verdict (0, 1, 2, or 3 incomplete).
    local -a reports=() incomplete_tasks=()
    for (( i = 0; i < tasks; ++i )); do
      [[ -f "$dir/reports/shard-$i.json" ]] && reports+=("$dir/reports/shard-$i.json")
    done
    for i in "${ids[@]}"; do
      [[ "${task_state[$i]}" != COMPLETED ]] && incomplete_tasks+=(--incomplete "task $i ${task_state[$i]}")
    done
    "$nvfp4check" merge --summary --shards "$tasks" --report "$dir/merged.json" "${incomplete_tasks[@]}" \
      --resubmit "$script submit --dir $dir" "${reports[@]}" >> "$summary" 2>&1
    status=$?
    [[ $status -le 3 ]] || { status=2; echo "verdict: ERROR (merge --summary exited abnormally)" >> "$summary"; }
    finish_round "$round" "$summary" "$status"
    return "$status"
  else
    fuzz_env
    export NVFP4_FUZZ_CASE_DIR="$round/cases/merge"  # a failure met while merging saves its case here
    campaign_env=()
    # The corpus: minimized (-merge=1) into a new folder that then replaces it, so the next
    # round starts from the smallest set with the same coverage.
    mkdir -p "$dir/corpus.merging"
    # Inputs that crash while merging or measuring are the tasks' findings again: their artifacts
    # go to the logs, not into the job's working directory.
    if "$fuzzer" -merge=1 -timeout="$fuzz_timeout" -rss_limit_mb="$rss_mb" -artifact_prefix="$round/logs/merge-" \
         "$dir/corpus.merging" \
         "$dir/corpus" ${seeds:+"$seeds"} > "$round/logs/merge.log" 2>&1; then
      rm -rf "$dir/corpus.before"
      mv "$dir/corpus" "$dir/corpus.before" && mv "$dir/corpus.merging" "$dir/corpus" && rm -rf "$dir/corpus.before"
    else
      echo "warning: corpus merge failed (see $round/logs/merge.log); the corpus is left as it was" >> "$summary"
      rm -rf "$dir/corpus.merging"
    fi
    "$fuzzer" -runs=0 -artifact_prefix="$round/logs/coverage-" "$dir/corpus" > "$round/logs/coverage.log" 2>&1
    local coverage execs
    coverage=$(grep -E "INITED|DONE" "$round/logs/coverage.log" | tail -1 | grep -oE "cov: [0-9]+ ft: [0-9]+" || echo "cov: ? ft: ?")
    execs=$(cat "$round"/logs/task-*.log 2>/dev/null | grep -oE "stat::number_of_executed_units:[[:space:]]+[0-9]+" | awk '{s += $2} END {print s + 0}')
    echo "executions: $execs in all; coverage of the merged corpus: $coverage; corpus $(find "$dir/corpus" -type f | wc -l) file(s) in $dir/corpus" >> "$summary"
    campaign_replay_crashes kernel "$fuzzer" "$nvfp4check" "$round/crashes" "$round/cases" "$summary"
    found=$campaign_failures
    # Tasks that completed and ran nothing checked nothing: not a pass.
    [[ $execs -eq 0 && $found -eq 0 ]] && { incomplete=1; echo "no executions in this round: nothing was checked" >> "$summary"; }
  fi

  if [[ $status -eq 2 ]]; then :
  elif [[ $found -gt 0 ]]; then status=1
  elif [[ $incomplete -eq 1 ]]; then status=3
  fi
  local not_done=""
  for i in "${ids[@]}"; do [[ "${task_state[$i]}" != COMPLETED ]] && not_done+=" task $i ${task_state[$i]},"; done
  case $status in
    0) echo "verdict: PASS (every task completed, nothing failed)" >> "$summary" ;;
    1) echo "verdict: FAIL ($found failure(s) above)${not_done:+; also incomplete:${not_done%,}}" >> "$summary" ;;
    3) echo "verdict: INCOMPLETE, not a pass:${not_done%,}; resubmit: $script submit --dir $dir" >> "$summary" ;;
    *) echo "verdict: ERROR (see the logs in $round/logs)" >> "$summary" ;;
  esac
  finish_round "$round" "$summary" "$status"
  return "$status"
}

# The round's summary and status where the submitter and the next round look.
finish_round() {
  local round=$1 summary=$2 status=$3 dir
  dir=$(cd "$round/../.." && pwd)
  cp "$summary" "$dir/summary.txt"
  echo "$status" > "$round/exit-status"
  cat "$summary"
}

# What every task would refuse (an unknown kernel, a missing plugin, a seed of 2^64 or more, a
# shard count or --jobs beyond the program's limits) is refused at submit, exit 2, before the
# cluster allocates anything: one case of the campaign's run, here.
refuse_what_tasks_refuse() {
  local tmp rc k p
  local -a args=(run --cases 1 --shard "0/$tasks" --seed "$seed")
  for k in "${kernels[@]}"; do args+=(--kernel "$k"); done
  for p in "${plugins[@]}"; do args+=(--plugin "$p"); done
  [[ -n "$memory" ]] && args+=(--memory "$memory")
  [[ -n "$jobs" ]] && args+=(--jobs "$jobs")
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-campaign-check.XXXXXX") || die "cannot make a temporary folder"
  "$nvfp4check" "${args[@]}" --case-dir "$tmp/cases" --report "$tmp/report.json" > "$tmp/log" 2>&1
  rc=$?
  if [[ $rc -eq 2 ]]; then
    sed 's/^/  /' "$tmp/log" | grep -v '^ *$' | tail -5 >&2
    rm -rf "$tmp"
    die "every task would refuse these arguments (nvfp4check ${args[*]} exits 2, above)"
  fi
  rm -rf "$tmp"
}

# ---- submit ----
submit_main() {
  local dir="" new_mode="" new=0 wait=0 local_run=0 local_gpus="" time_limit="" partition="" account=""
  local -a sbatch_args=() new_kernels=() new_plugins=()
  local o_tasks="" o_seed="" o_cases="" o_seconds="" o_jobs="" o_build="" o_seeds="" o_no_seeds=0
  local o_gpus="" o_cpus="" o_memory=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --dir) dir=${2:?--dir needs a value}; shift 2 ;;
      --mode) new_mode=${2:?}; new=1; shift 2 ;;
      --tasks) o_tasks=${2:?}; new=1; shift 2 ;;
      --kernel) new_kernels+=("${2:?}"); new=1; shift 2 ;;
      --plugin) new_plugins+=("$(realpath "${2:?}")"); new=1; shift 2 ;;
      --memory) o_memory=${2:?}; new=1; shift 2 ;;
      --seed) o_seed=${2:?}; new=1; shift 2 ;;
      --cases) o_cases=${2:?}; new=1; shift 2 ;;
      --seconds) o_seconds=${2:?}; new=1; shift 2 ;;
      --jobs) o_jobs=${2:?}; new=1; shift 2 ;;
      --build) o_build=${2:?}; new=1; shift 2 ;;
      --seeds) o_seeds=${2:?}; new=1; shift 2 ;;
      --no-seeds) o_no_seeds=1; new=1; shift ;;
      --gpus-per-task) o_gpus=${2:?}; shift 2 ;;
      --cpus-per-task) o_cpus=${2:?}; shift 2 ;;
      --time) time_limit=${2:?}; shift 2 ;;
      --partition) partition=${2:?}; shift 2 ;;
      --account) account=${2:?}; shift 2 ;;
      --sbatch-arg) sbatch_args+=("${2:?}"); shift 2 ;;
      --sbatch-arg=*) sbatch_args+=("${1#--sbatch-arg=}"); shift ;;
      --wait) wait=1; shift ;;
      --local) local_run=1; if [[ $# -ge 2 && "$2" =~ ^[0-9,]+$ ]]; then local_gpus=$2; shift; fi; shift ;;
      -h|--help) sed -n '2,45p' "$script"; exit 0 ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
  done
  [[ -n "$dir" ]] || die "--dir DIR is required (a folder every node sees)"
  mkdir -p "$dir" || die "cannot create $dir"
  dir=$(cd "$dir" && pwd)

  if [[ -f "$dir/campaign.conf" ]]; then
    [[ $new -eq 0 ]] || die "$dir already holds a campaign (campaign.conf): resubmit it with --dir and Slurm options only, or use a new --dir"
    load_conf "$dir"
    [[ -n "$o_gpus" ]] && gpus_per_task=$o_gpus
    [[ -n "$o_cpus" ]] && cpus_per_task=$o_cpus
  else
    mode=${new_mode:-run}
    [[ $mode == run || $mode == fuzz ]] || die "--mode must be run or fuzz"
    tasks=${o_tasks:-2}
    is_count "$tasks" || die "--tasks needs a positive integer"
    kernels=("${new_kernels[@]}")
    plugins=("${new_plugins[@]}")
    memory=$o_memory
    [[ -z "$memory" || $memory == host || $memory == cuda ]] || die "--memory must be host or cuda"
    seed=${o_seed:-$(( $(date +%s%N) % 1000000007 ))}
    [[ "$seed" =~ ^[0-9]+$ ]] || die "--seed needs a non-negative integer"
    cases=$o_cases seconds=$o_seconds jobs=$o_jobs
    [[ -z "$cases" ]] || is_count "$cases" || die "--cases needs a positive integer"
    [[ -z "$seconds" ]] || is_count "$seconds" || die "--seconds needs a positive integer"
    [[ -z "$jobs" ]] || is_count "$jobs" || die "--jobs needs a positive integer"
    if [[ $mode == run ]]; then
      [[ -n "$cases" || -n "$seconds" ]] || seconds=60
      build=${o_build:-$repo_root/build/default}
    else
      [[ -z "$cases" ]] || die "--cases is for --mode run (fuzz workers run for --seconds)"
      seconds=${seconds:-600}
      build=${o_build:-$(campaign_fuzz_build "$repo_root" kernel)}
    fi
    build=$(cd "$build" 2>/dev/null && pwd) || die "no build folder ${o_build:-$build}"
    seeds=""
    if [[ $mode == fuzz && $o_no_seeds -eq 0 ]]; then
      seeds=$(cd "${o_seeds:-$repo_root/corpus/kernel}" 2>/dev/null && pwd) || die "no seed corpus ${o_seeds:-corpus/kernel}"
    fi
    gpus_per_task=${o_gpus:-0}
    cpus_per_task=${o_cpus:-}
    fuzz_timeout=60 max_crashes=3
    [[ "$gpus_per_task" =~ ^[0-9]+$ ]] || die "--gpus-per-task needs a whole number"
    [[ -z "$cpus_per_task" ]] || is_count "$cpus_per_task" || die "--cpus-per-task needs a positive integer"
    [[ $gpus_per_task -eq 0 && -z "$cpus_per_task" ]] && cpus_per_task=1
    nvfp4check="$build/cli/nvfp4check" fuzzer="$build/fuzz/kernel_fuzzer"
    [[ -x "$nvfp4check" ]] || die "no $nvfp4check (build it first)"
    if [[ $mode == fuzz ]]; then
      [[ -x "$fuzzer" ]] || die "no $fuzzer (build the \`fuzz\` preset)"
      grep -aq "max_total_time" "$fuzzer" || die "$fuzzer is a replay-only build: fuzz mode needs libFuzzer (preset fuzz)"
    fi
    if [[ $mode == fuzz ]]; then
      # Task i's run r uses seed + 100000 round + 1000 i + r: a 32-bit libFuzzer seed.
      [[ ${#seed} -le 10 ]] && (( 10#$seed <= 4000000000 )) ||
        die "--seed needs a non-negative integer of at most 4000000000 in fuzz mode (libFuzzer's seeds are 32-bit)"
    fi
    refuse_what_tasks_refuse
    mkdir -p "$dir/reports" "$dir/cases" "$dir/corpus" "$dir/rounds" || die "cannot write in $dir"
    {
      echo "# The settings of this campaign, written by slurm-campaign.sh submit (read back on resubmit)."
      # -g: read back inside a function, they must still be the script's globals
      declare -p mode tasks kernels plugins memory seed cases seconds jobs build seeds gpus_per_task cpus_per_task \
        fuzz_timeout max_crashes |
        sed -E 's/^declare -(-|([a-zA-Z]+)) /declare -g\2 /'
    } > "$dir/campaign.conf"
    echo "campaign: $mode mode, $tasks task(s), seed $seed, folder $dir"
  fi

  # The tasks of this round: run mode, the shards without a report yet; fuzz mode, all.
  local -a ids=()
  local i
  for (( i = 0; i < tasks; ++i )); do
    [[ $mode == run && -f "$dir/reports/shard-$i.json" ]] && continue
    ids+=("$i")
  done
  local r=1
  while [[ -e "$dir/rounds/$r" ]]; do r=$(( r + 1 )); done
  local round="$dir/rounds/$r"
  mkdir -p "$round"/{tasks,logs,crashes,cases} || die "cannot write in $dir/rounds"
  echo "${ids[*]}" > "$round/task-ids"
  [[ ${#ids[@]} -eq 0 ]] && echo "every shard has a report already: this round only merges"

  local -a res=()
  [[ $gpus_per_task -gt 0 ]] && res+=(--gres="gpu:$gpus_per_task")
  [[ -n "$cpus_per_task" ]] && res+=(--cpus-per-task="$cpus_per_task")
  [[ -z "$time_limit" && -n "$seconds" ]] && time_limit=$(( seconds / 60 + 10 ))
  [[ -n "$time_limit" ]] && res+=(--time="$time_limit")
  [[ -n "$partition" ]] && res+=(--partition="$partition")
  [[ -n "$account" ]] && res+=(--account="$account")

  if [[ $local_run -eq 1 ]]; then
    echo local > "$round/array-job"
    local_tasks "$round" "$local_gpus" "${ids[@]}"
    finish_main "$round"
    exit $?
  fi

  command -v sbatch >/dev/null 2>&1 || die "sbatch not found: no Slurm here (--local runs the same campaign on this machine)"
  local name="nvfp4-$(basename "$dir")" array_job="" finish_job dep=()
  if [[ ${#ids[@]} -gt 0 ]]; then
    local spec
    spec=$(IFS=,; echo "${ids[*]}")
    array_job=$(sbatch --parsable --job-name="$name" --array="$spec" --output="$round/logs/slurm-%a.out" \
      "${res[@]}" "${sbatch_args[@]}" --wrap "exec bash $(printf %q "$script") task $(printf %q "$round")") ||
      die "sbatch refused the array"
    array_job=${array_job%%;*}
    dep=(--dependency="afterany:$array_job")
  else
    array_job=none
  fi
  echo "$array_job" > "$round/array-job"
  # The finishing job gets one task's resources: merging a corpus and replaying run the kernels.
  finish_job=$(sbatch --parsable --job-name="$name-finish" "${dep[@]}" --output="$round/logs/finish.out" \
    "${res[@]}" --wrap "exec bash $(printf %q "$script") finish $(printf %q "$round")") ||
    die "sbatch refused the finishing job"
  finish_job=${finish_job%%;*}
  echo "$finish_job" > "$round/finish-job"
  echo "round $r: array job $array_job (task(s) ${ids[*]:-none}), finishing job $finish_job (afterany)"
  echo "summary when done: $round/summary.txt (and $dir/summary.txt); watch: squeue -j $array_job,$finish_job"
  [[ $wait -eq 1 ]] || exit 0
  while squeue -h -j "$finish_job" 2>/dev/null | grep -q .; do sleep 2; done
  [[ -f "$round/exit-status" ]] || die "the finishing job $finish_job ended without a summary (see $round/logs/finish.out)"
  cat "$round/summary.txt"
  exit "$(cat "$round/exit-status")"
}

# --local: the array's tasks on this machine, as many at once as there are GPUs listed (tasks with
# GPUs) or groups of --cpus-per-task cores; their states are what Slurm would have recorded.
local_tasks() {
  local round=$1 gpu_list=$2
  shift 2
  local -a gpus=() pids=() slots=()
  local width i slot pid
  if [[ $gpus_per_task -gt 0 ]]; then
    if [[ -n "$gpu_list" ]]; then IFS=, read -r -a gpus <<< "$gpu_list"
    else mapfile -t gpus < <(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | tr -d ' ')
    fi
    [[ ${#gpus[@]} -gt 0 ]] || gpus=(0)
    width=${#gpus[@]}
  else
    width=$(( $(nproc) / ${cpus_per_task:-1} ))
    [[ $width -ge 1 ]] || width=1
  fi
  echo "local: $# task(s), $width at a time${gpus[*]:+ on GPU(s) ${gpus[*]}}"
  for i in "$@"; do
    # A free slot: wait for the oldest task when all are busy.
    while [[ ${#pids[@]} -ge $width ]]; do
      wait "${pids[0]}"; pids=("${pids[@]:1}"); slots=("${slots[@]:1}")
    done
    slot=0
    while [[ " ${slots[*]} " == *" $slot "* ]]; do slot=$(( slot + 1 )); done
    (
      [[ ${#gpus[@]} -gt 0 ]] && export CUDA_VISIBLE_DEVICES="${gpus[$slot]}"
      export SLURM_CPUS_PER_TASK="${cpus_per_task:-1}"
      NVFP4_CAMPAIGN_TASK=$i bash "$script" task "$round" > "$round/logs/local-$i.out" 2>&1
      if [[ $? -eq 0 ]]; then echo COMPLETED; else echo FAILED; fi > "$round/tasks/$i.state"
    ) &
    pids+=($!)
    slots+=("$slot")
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}

[[ $# -ge 1 ]] || die "usage: slurm-campaign.sh submit --dir DIR [...] | summary DIR (see --help)"
cmd=$1
shift
case "$cmd" in
  submit) submit_main "$@" ;;
  task) task_main "${1:?round folder}" ;;
  finish) round=${1:?round folder}; finish_main "$round" ;;
  summary)
    d=${1:?campaign folder}
    last=$(ls -1 "$d/rounds" 2>/dev/null | sort -n | tail -1)
    [[ -n "$last" ]] || die "$d holds no round"
    if [[ -f "$d/rounds/$last/exit-status" ]]; then
      cat "$d/rounds/$last/summary.txt"; exit "$(cat "$d/rounds/$last/exit-status")"
    fi
    echo "round $last is not finished: squeue -j $(cat "$d/rounds/$last/array-job"),$(cat "$d/rounds/$last/finish-job" 2>/dev/null)"
    exit 3 ;;
  -h|--help) sed -n '2,45p' "$script" ;;
  *) die "unknown command '$cmd' (submit or summary)" ;;
esac
