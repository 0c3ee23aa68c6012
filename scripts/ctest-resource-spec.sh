#!/usr/bin/env bash
# Writes a ctest resource specification (JSON) listing this machine's GPUs, so that
#   ctest --resource-spec-file FILE -j N
# spreads the tests that declare RESOURCE_GROUPS "gpus:1" over every GPU: ctest hands each such
# test one GPU id in CTEST_RESOURCE_GROUP_0_GPUS ("id:3,slots:1") and the test selects that
# device (CUDA_VISIBLE_DEVICES=3). Ids are nvidia-smi indices, which are CUDA ordinals when
# CUDA_DEVICE_ORDER=PCI_BUS_ID (this script prints the export to use).
#
# Usage: scripts/ctest-resource-spec.sh [-o FILE] [--slots N] [--allow-none]
#   -o FILE       where to write (default: stdout)
#   --slots N     tests allowed on one GPU at once (default 1)
#   --allow-none  write an empty GPU list instead of failing when no GPU is found
#   Respects CUDA_VISIBLE_DEVICES when it lists numeric indices (only those GPUs are offered).
# Example (2 GPUs):
#   scripts/ctest-resource-spec.sh -o build/gpu/resources.json
#   CUDA_DEVICE_ORDER=PCI_BUS_ID ctest --test-dir build/gpu -L gpu -j 2 \
#       --resource-spec-file build/gpu/resources.json
set -euo pipefail

out=""
slots=1
allow_none=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    --slots) slots="$2"; shift 2 ;;
    --allow-none) allow_none=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "ctest-resource-spec.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$slots" =~ ^[1-9][0-9]*$ ]]; then
  echo "ctest-resource-spec.sh: --slots needs a positive integer, got '$slots'" >&2
  exit 2
fi

ids=()
if command -v nvidia-smi >/dev/null 2>&1; then
  while IFS= read -r line; do
    line="${line//[[:space:]]/}"
    [[ "$line" =~ ^[0-9]+$ ]] && ids+=("$line")
  done < <(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null || true)
fi
# Keep only the GPUs CUDA_VISIBLE_DEVICES allows, when it is a list of indices.
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" && "${CUDA_VISIBLE_DEVICES}" =~ ^[0-9]+(,[0-9]+)*$ ]]; then
  IFS=, read -r -a visible <<< "${CUDA_VISIBLE_DEVICES}"
  kept=()
  for id in "${ids[@]}"; do
    for v in "${visible[@]}"; do [[ "$id" == "$v" ]] && kept+=("$id"); done
  done
  ids=("${kept[@]}")
fi

if [[ ${#ids[@]} -eq 0 && $allow_none -eq 0 ]]; then
  echo "ctest-resource-spec.sh: no GPU found (nvidia-smi missing or lists none); use --allow-none" \
       "to write an empty spec" >&2
  exit 1
fi

gpus=""
for id in "${ids[@]}"; do
  gpus+="${gpus:+, }{\"id\": \"$id\", \"slots\": $slots}"
done
json="{\"version\": {\"major\": 1, \"minor\": 0}, \"local\": [{\"gpus\": [${gpus}]}]}"
if [[ -n "$out" ]]; then
  mkdir -p "$(dirname "$out")"
  printf '%s\n' "$json" > "$out"
  echo "ctest-resource-spec.sh: ${#ids[@]} GPU(s) (${ids[*]:-none}), $slots slot(s) each -> $out" >&2
else
  printf '%s\n' "$json"
fi
echo "ctest-resource-spec.sh: run ctest with CUDA_DEVICE_ORDER=PCI_BUS_ID so ids match CUDA ordinals" >&2
