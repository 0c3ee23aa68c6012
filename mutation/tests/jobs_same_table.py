#!/usr/bin/env python3
"""`nvfp4check mutants --jobs N` prints and reports the table of --jobs 1.

Each row runs in a worker process of its own, several side by side; a row's cases come from the
seed and the kernel's name alone, so the kills, their cases and checks, the weak columns and the
honest rows must not move, and the progress lines keep the table's order.
Usage: jobs_same_table.py NVFP4CHECK MUTANTS_PLUGIN HONEST_PLUGIN WORKDIR
"""
import json
import os
import subprocess
import sys

program, mutants, honest, work = sys.argv[1:5]
KERNELS = ["mut_host_zero_skip", "mut_host_acc_not_reset", "mut_host_fp16_accumulation", "mut_host_nibble_swap_b",
           "mut_host_grouped_alpha_of_first", "mut_host_dual_alpha2_ignored", "mut_host_fp32_ftz",
           "mut_host_output_round_toward_zero", "ctl_host_unmutated", "honest_host_forward"]


def table(jobs):
    report = os.path.join(work, f"jobs{jobs}.json")
    cmd = [program, "mutants", "--memory", "host", "--budget", "60", "--weak-cases", "20", "--honest-cases", "20",
           "--seed", "11", "--plugin", mutants, "--honest-plugin", honest, "--jobs", str(jobs), "--report", report,
           "--case-dir", os.path.join(work, f"cases{jobs}")]
    for k in KERNELS:
        cmd += ["--kernel", k]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"--jobs {jobs}: exit {r.returncode}\n{r.stderr}")
    with open(report) as f:
        d = json.load(f)
    rows = []
    for m in d["mutants"]:
        rows.append([m["name"]] + [(m[c].get("failed"), m[c].get("cases"), m[c].get("check"), m[c].get("case_desc"))
                                   for c in ("suite", "gpu_mode", "kernelbench") if c in m])
    for h in d["honest"]:
        rows.append([h["name"], h["suite"].get("failed"), h["suite"].get("cases")])
    order = [line.split(":")[0].strip() for line in r.stderr.splitlines()
             if line.startswith("  ") and not line.startswith("    ") and ":" in line]
    return r.returncode, rows, order


os.makedirs(work, exist_ok=True)
one, many = table(1), table(4)
if len(one[1]) != len(KERNELS):
    sys.exit(f"--jobs 1 reported {len(one[1])} rows, not {len(KERNELS)}")
problems = []
if one[0] != many[0]:
    problems.append(f"exit {one[0]} with --jobs 1, {many[0]} with --jobs 4")
for a, b in zip(one[1], many[1]):
    if a != b:
        problems.append(f"row differs:\n  --jobs 1: {a}\n  --jobs 4: {b}")
if one[2] != many[2]:
    problems.append(f"progress lines in another order:\n  --jobs 1: {one[2]}\n  --jobs 4: {many[2]}")
if problems:
    sys.exit("\n".join(problems))
print(f"{len(one[1])} rows, the same with --jobs 1 and 4; progress in the table's order: {', '.join(one[2])}")
