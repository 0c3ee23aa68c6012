#!/usr/bin/env python3
"""Whether two `nvfp4check mutants --report` files hold the same kill table.

A change that makes the suite faster must not change what it finds: the same seed must kill the
same mutants at the same cases by the same checks, the weaker checks must keep their columns and
the honest kernels their false-alarm counts. This compares, entry by entry, everything that a
report says about that (not the times):

  mutant NAME       failed, cases, the failing check and the failing case's description
  mutant NAME:WEAK  the same for the GPU MODE and KernelBench style columns
  honest NAME       failed and cases

Two tables are comparable only from the same seed and the same suite budget. Where one of them
skipped the weak checks (--no-weak) or the honest kernels (--honest-cases 0), those columns are
left out of the comparison, and the summary says so.

Usage: scripts/compare-mutants.py RECORD NEW
Exit status: 0 the same table, 1 a difference (each one listed), 2 unreadable input or tables
that are not comparable (another seed or budget).
"""
import json
import sys


def entries(report):
    out = {}
    for m in report.get("mutants", []):
        s = m.get("suite", {})
        out["mutant " + m["name"]] = (s.get("failed"), s.get("cases"), s.get("check"),
                                      s.get("case_desc") or s.get("case"))
        for weak in ("gpu_mode", "kernelbench"):
            if weak in m:
                w = m[weak]
                out["mutant %s:%s" % (m["name"], weak)] = (w.get("failed"), w.get("cases"), w.get("check"))
    for h in report.get("honest", []):
        out["honest " + h["name"]] = (h["suite"].get("failed"), h["suite"].get("cases"))
    return out


def weak_ran(report):
    return any(m.get(w, {}).get("ran") for m in report.get("mutants", []) for w in ("gpu_mode", "kernelbench"))


def is_weak(key):
    return key.startswith("mutant ") and key.endswith((":gpu_mode", ":kernelbench"))


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    try:
        record, new = (json.load(open(path)) for path in argv[1:])
        a, b = entries(record), entries(new)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("compare-mutants: cannot read the reports: %s" % e, file=sys.stderr)
        return 2
    for key, what in (("seed", "seeds"), ("budget", "suite budgets")):
        if record.get(key) != new.get(key):
            print("compare-mutants: the %s differ (%s, %s): the tables are not comparable"
                  % (what, record.get(key), new.get(key)), file=sys.stderr)
            return 2
    # Columns that one of the two runs skipped are not compared.
    left_out = []
    if weak_ran(record) != weak_ran(new):
        left_out.append("the weak checks (%s ran without them)" % ("the record" if weak_ran(new) else "the new report"))
        a, b = ({k: v for k, v in t.items() if not is_weak(k)} for t in (a, b))
    if bool(record.get("honest")) != bool(new.get("honest")):
        left_out.append("the honest kernels (%s ran none)" % ("the record" if new.get("honest") else "the new report"))
        a, b = ({k: v for k, v in t.items() if not k.startswith("honest ")} for t in (a, b))
    differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    for k in differ:
        print("%s\n  record: %s\n  new:    %s" % (k, a.get(k, "(absent)"), b.get(k, "(absent)")))
    if left_out:
        print("not compared: " + "; ".join(left_out))
    print("%d entries in the record, %d in the new report; %d differ (seed %s)"
          % (len(a), len(b), len(differ), record.get("seed")))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
