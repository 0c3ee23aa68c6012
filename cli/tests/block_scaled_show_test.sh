#!/usr/bin/env bash
# `reference` and `show` describe a block-scaled output case (out_type nvfp4): the recipe, the
# global scales and each block's scale byte and codes in words (hex and value); a wrong expect
# line and a kernel's wrong output are described at their first differing block, reference
# beside the other. The cases are worked by hand (cli/tests/block_scaled_*.case).
# Usage: block_scaled_show_test.sh NVFP4CHECK MUTANTS_PLUGIN CASE_DIR
set -uo pipefail
program=$1 plugin=$2 cases=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$dir/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAILED: $*"; exit 1; }
# run CODE ARG...: the program exits with CODE; its stdout and stderr go to $dir/out.
run() {
  local want=$1
  shift
  "$program" "$@" >"$dir/out" 2>&1
  local rc=$?
  cat "$dir/out"
  [ "$rc" = "$want" ] || fail "$*: exit $rc, expected $want"
}
has() { grep -qF -- "$1" "$dir/out" || fail "the output lacks: $1"; }
block1='batch 0, row 0, block 1 (columns 16..17)'
right='scale 0x44 (3); codes 0x7 (6) 0xD (-3)'
wrong='scale 0x44 (3); codes 0x5 (3) 0xD (-3)'

run 0 reference "$cases/block_scaled_gemm.case" --out "$dir/q_sfq"
has "out_type=nvfp4, recipe te, global scale 6: wrote Q (9 bytes) and SFQ (2 bytes, linear)"
has "batch 0, row 0, block 0 (columns 0..15): scale 0x4C (6); codes 0x0 (0) 0x1 (0.5) 0x2 (1)"
has "$block1: $right"
[ "$(od -An -tx1 "$dir/q_sfq" | tr -d ' \n')" = "1032547690badcfed74c44" ] || fail "reference wrote $(od -An -tx1 "$dir/q_sfq")"

run 0 show "$cases/block_scaled_gemm.case"
has "recipe     te"
has "global     6 (0x1.8p+2)"
has "blocks     2  exact regime 2 (100.0%"
has "  $block1: $right"
has "expect     all 11 bytes of expect_q and expect_sfq match the reference"

run 1 reference "$cases/block_scaled_wrong_expect.case" --out "$dir/q_sfq"
has "first differing block: $block1"
has "expect     $wrong"
has "reference  $right"
has "1 of 11 bytes (1 of 2 blocks) differ from the case's expect_q and expect_sfq"

run 1 show "$cases/block_scaled_wrong_expect.case"
has "expect     1 of 11 bytes DIFFER from the reference (1 of 2 blocks); first at $block1"
has "  reference  $right"
has "  expect     $wrong"

# One global scale per group; an empty group has no blocks.
run 0 reference "$cases/block_scaled_grouped.case" --out "$dir/q_sfq"
has "global scales 6 1 12"
has "group 2, row 0, block 0 (columns 0..1): scale 0x48 (4); codes 0x7 (6) 0x3 (1.5)"
run 0 show "$cases/block_scaled_grouped.case" --kernel host_grouped_gemm_nvfp4_out
has "global     one per group: g0 6 (0x1.8p+2) g1 1 (0x1p+0) g2 12 (0x1.8p+3)"
has "kernel     host_grouped_gemm_nvfp4_out: pass"
has "output     every block is the reference's, byte for byte"

# A kernel that encodes every group with group 0's global scale (cutlass PR #3392): its output at
# the first block where it differs, the reference's beside it.
run 1 show "$cases/block_scaled_grouped.case" --kernel mut_host_out_group0_global_scale --plugin "$plugin"
has "kernel     mut_host_out_group0_global_scale: fail (oracle, run 1)"
has "output     1 of 3 blocks differ from the reference"
has "first at group 2, row 0, block 0 (columns 0..1)"
has "  reference  scale 0x48 (4); codes 0x7 (6) 0x3 (1.5)"
has "  kernel     scale 0x40 (2); codes 0x7 (6) 0x3 (1.5)"

run 2 show "$cases/block_scaled_gemm.case" --kernel no_such_kernel
echo ok
