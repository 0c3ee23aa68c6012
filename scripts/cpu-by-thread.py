#!/usr/bin/env python3
"""Whose threads take the CPU of a run, while it runs: the runner (`nvfp4check run`), the kernels'
processes (`nvfp4check worker`) and the MPS server, by thread name.

A lane's stage times (a report's stage_seconds) say where one case's wall time goes; they do not
say how much CPU a case costs the machine, nor in which process. On a GPU machine whose rows stop
well short of its cores (issue 33's medium GEMV, grouped and dual rows), that is the question:
this samples /proc/PID/task/TID/schedstat (nanoseconds run, and waited runnable for a CPU) of
every such thread twice and prints the difference over the window, so that a row's cases/s turn
into CPU milliseconds a case per process, and the run-queue wait shows whether the threads that
want a CPU get one.

Usage: scripts/cpu-by-thread.py [--wait S] [--seconds S] [--rate CASES_PER_S] [--pid PID] [--json FILE]
  --wait     seconds before the first sample (default 3: past the processes' start); with --pid,
             counted from that process's start, so a sampler slow to start itself (a loaded
             machine: Python's own start took a second on 2 busy cores) still samples the middle
  --seconds  the window (default 8)
  --rate     the row's cases a second: adds CPU milliseconds a case to each line
  --pid      only this process and its descendants (a runner and its kernels' processes; the MPS
             server, a daemon, is then left out): other runs on the machine are not counted
  --json     also write {"seconds", "run", "wait", "by_role": {role: CPU seconds}} to FILE
Start it beside `nvfp4check run ... --seconds N` with --wait + --seconds < N. Exit status: 0, or
1 where no nvfp4check thread was alive at the second sample (nothing measured). A thread born
between the samples counts from its birth.
"""
import argparse
import json
import os
import sys
import time


def role_of(pid):
    """runner, worker, mps or None, from the process's executable (the runner re-executes itself
    through /proc/self/exe, so its comm is "exe" and only the executable names it)."""
    try:
        exe = os.path.realpath(f"/proc/{pid}/exe")
        if exe.endswith("/nvidia-cuda-mps-server"):
            return "mps"
        if not exe.endswith("/nvfp4check"):
            return None
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        return "worker" if b"worker" in args[1:3] else "runner"
    except OSError:  # gone, or not ours to read
        return None


def stat_fields(pid):
    """/proc/PID/stat's fields after the command (which may hold spaces): [0] the state, [1] the
    parent, [19] the start time in clock ticks; None where the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(root):
    """root and every process below it, from each process's parent in /proc/PID/stat."""
    children = {}
    for pid in os.listdir("/proc"):
        fields = stat_fields(pid) if pid.isdigit() else None
        if fields:
            children.setdefault(fields[1], []).append(pid)
    found, todo = set(), [str(root)]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def sample(root=None):
    """{(pid, tid): (ns run, ns waited, role, thread name)} of every thread of interest."""
    out = {}
    pids = descendants(root) if root else [p for p in os.listdir("/proc") if p.isdigit()]
    for pid in pids:
        role = role_of(pid)
        if role is None:
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    run, wait = (int(x) for x in f.read().split()[:2])
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    comm = f.read().strip()
            except (OSError, ValueError):
                continue
            out[(pid, tid)] = (run, wait, role, comm)
    return out


def age(pid):
    """Seconds since process pid started, or 0: /proc/PID/stat's starttime is on the boot-time
    clock, which CLOCK_BOOTTIME reads (a container's /proc/uptime may be its own)."""
    fields = stat_fields(pid)
    try:
        start_ticks = int(fields[19])
    except (TypeError, IndexError, ValueError):
        return 0.0
    return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wait", type=float, default=3.0)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    time.sleep(max(0.0, a.wait - (age(a.pid) if a.pid else 0.0)))
    first = sample(a.pid)
    start = time.monotonic()
    time.sleep(a.seconds)
    second = sample(a.pid)
    span = time.monotonic() - start
    # Every thread alive at the second sample. One born since the first (a lane's reference thread,
    # its OpenMP team: a runner's first cases may not need them) counts from its birth, all of it
    # in the window; leaving such threads out read an H100 runner at a fifth to a third of its CPU.
    if not second:
        print("cpu-by-thread: no nvfp4check thread was alive at the second sample", file=sys.stderr)
        return 1
    groups = {}
    for k in second:
        was = first.get(k, (0, 0))
        run = (second[k][0] - was[0]) / 1e9
        wait = (second[k][1] - was[1]) / 1e9
        key = (second[k][2], second[k][3])
        r, w, n = groups.get(key, (0.0, 0.0, 0))
        groups[key] = (r + run, w + wait, n + 1)
    run = sum(g[0] for g in groups.values())
    wait = sum(g[1] for g in groups.values())
    per_case = (lambda s: f", {1e3 * s / span / a.rate:.2f} CPU-ms a case") if a.rate > 0 else (lambda s: "")
    print(f"over {span:.1f} s: {run / span:.2f} cores run{per_case(run)}; waited runnable {wait / span:.2f} "
          f"threads on average (wait/run {wait / max(run, 1e-9):.2f})")
    by_role = {}
    for (role, _), (r, w, n) in groups.items():
        rr, ww, nn = by_role.get(role, (0.0, 0.0, 0))
        by_role[role] = (rr + r, ww + w, nn + n)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"seconds": span, "run": run, "wait": wait, "by_role": {k: v[0] for k, v in by_role.items()}}, f)
    for role, (r, w, n) in sorted(by_role.items(), key=lambda kv: -kv[1][0]):
        print(f"  {role:6s} {'(all)':16s} threads {n:3d}  cores run {r / span:5.2f}  waited {w / span:5.2f}{per_case(r)}")
    for (role, comm), (r, w, n) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        if r / span >= 0.005:
            print(f"  {role:6s} {comm:16s} threads {n:3d}  cores run {r / span:5.2f}  waited {w / span:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
