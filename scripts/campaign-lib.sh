# Shell functions the fuzz campaigns share (sourced by scripts/fuzz-campaign.sh and
# scripts/slurm-campaign.sh): every crash artifact of libFuzzer turned into case files and replayed
# with `nvfp4check replay`, with the kernel and plugin the kernel fuzzer records for each case.

# campaign_fuzz_build ROOT TARGET: the build folder under ROOT whose fuzzers a campaign runs: the
# `fuzz-campaign` preset's (no sanitizers: about 3x the executions) where it has TARGET's fuzzer
# and the program that replays its finds, else the `fuzz` preset's (ASan + UBSan).
campaign_fuzz_build() {
  local root=$1 target=$2
  if [[ -x "$root/build/fuzz-campaign/fuzz/${target}_fuzzer" && -x "$root/build/fuzz-campaign/cli/nvfp4check" ]]; then echo "$root/build/fuzz-campaign"
  else echo "$root/build/fuzz"; fi
}

# campaign_left_artifact PREFIX MARKER: whether a libFuzzer run wrote an artifact (PREFIX crash-,
# timeout-, oom-, leak-...) after MARKER was touched. A worker that exits non-zero without one
# found nothing: it did not run, or stopped for another reason (a sanitizer refusing the address
# space, a missing library), and counting it as a finding would pass work never checked.
campaign_left_artifact() {
  local prefix=$1 marker=$2
  [[ -n "$(find "$(dirname "$prefix")" -name "$(basename "$prefix")*" -newer "$marker" -print -quit 2>/dev/null)" ]]
}

# campaign_replay_crashes TARGET FUZZER NVFP4CHECK CRASH_DIR CASE_DIR SUMMARY
# Appends to SUMMARY one entry per distinct crash input (artifacts named PREFIX-crash-SHA1 etc.:
# PREFIX says which worker or task found it) and, for the kernel target, each case file it exports
# with the replay command and what the replay said. The array campaign_env, when set, prefixes
# every program run (e.g. env CUDA_VISIBLE_DEVICES=0). Sets campaign_failures (artifacts, slow
# units left out) and campaign_reproduced (case files whose replay exits 1).
campaign_replay_crashes() {
  local target=$1 fuzzer=$2 nvfp4check=$3 crashes=$4 cases_root=$5 summary=$6
  local art name who content case_dir c kernel origin path rc verdict slow_units
  local -a artifacts cmd prefix=()
  [[ ${#campaign_env[@]} -gt 0 ]] && prefix=("${campaign_env[@]}")
  campaign_failures=0
  campaign_reproduced=0
  # slow-unit-* files are inputs over libFuzzer's -report_slow_units time: listed, not failures.
  mapfile -t artifacts < <(find "$crashes" -type f ! -name '*slow-unit-*' 2>/dev/null | sort)
  slow_units=$(find "$crashes" -type f -name '*slow-unit-*' 2>/dev/null | wc -l)
  [[ $slow_units -gt 0 ]] && echo "slow inputs (not failures): $slow_units in $crashes" >> "$summary"
  echo "failures: ${#artifacts[@]} crash artifact(s) in $crashes" >> "$summary"
  declare -A seen_inputs=()
  for art in "${artifacts[@]}"; do
    campaign_failures=$(( campaign_failures + 1 ))
    name=$(basename "$art")
    who=$(sed -E 's/-?(crash|timeout|oom|leak)-[0-9a-f]+$//' <<< "$name")
    # Workers often find the same input (the seeds, or one bug reached from one corpus).
    content=$(sha1sum "$art" | cut -c1-40)
    if [[ -n "${seen_inputs[$content]:-}" ]]; then
      echo "  $name (found by ${who:-?}): the same input as ${seen_inputs[$content]}" >> "$summary"
      continue
    fi
    seen_inputs[$content]="$name"
    echo "  $name (found by ${who:-?})" >> "$summary"
    if [[ "$target" != kernel ]]; then
      echo "    reproduce: $fuzzer $art" >> "$summary"
      continue
    fi
    # The kernel fuzzer writes the input's case file for every chosen kernel without running it
    # (so a crash inside the kernel cannot stop the export), and names kernel and plugin in cases.tsv.
    case_dir="$cases_root/$name"
    mkdir -p "$case_dir"
    rm -f "$case_dir/cases.tsv"
    "${prefix[@]}" env NVFP4_FUZZ_SAVE=only NVFP4_FUZZ_CASE_DIR="$case_dir" "$fuzzer" -runs=1 "$art" \
      > "$case_dir/export.log" 2>&1
    if [[ ! -s "$case_dir/cases.tsv" ]]; then
      echo "    no case file (see $case_dir/export.log)" >> "$summary"
      continue
    fi
    while IFS=$'\t' read -r kernel origin path; do
      cmd=("$nvfp4check" replay "$path" --kernel "$kernel")
      [[ "$origin" != builtin ]] && cmd+=(--plugin "$origin")
      if [[ -x "$nvfp4check" ]]; then
        "${prefix[@]}" "${cmd[@]}" > "$path.replay.log" 2>&1
        rc=$?
        case $rc in
          1) verdict="reproduced (exit 1: the kernel fails)"; campaign_reproduced=$(( campaign_reproduced + 1 )) ;;
          0) verdict="did NOT reproduce (exit 0): flaky, or only under the fuzzer's sanitizers" ;;
          *) verdict="replay error (exit $rc, see $path.replay.log)" ;;
        esac
      else
        verdict="not replayed: no $nvfp4check"
      fi
      echo "    case $path" >> "$summary"
      echo "      ${cmd[*]}  -> $verdict" >> "$summary"
    done < "$case_dir/cases.tsv"
  done
}
