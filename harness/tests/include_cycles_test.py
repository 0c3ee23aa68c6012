#!/usr/bin/env python3
"""No two source files of a folder depend on each other, directly or through others: x.cc and x.h
are one unit, and x.cc including y.h makes x depend on y (when y has a source file of its own), so
a cycle means units that cannot be understood, built or moved apart. Usage:
include_cycles_test.py FOLDER... (exit 1 naming each cycle)."""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def units(folder):
    graph = {}
    sources = {p.stem for p in folder.iterdir() if p.suffix in (".cc", ".cu")}
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".cc", ".cu"):
            continue
        unit = f"{folder.name}/{path.stem}"
        for target in INCLUDE.findall(path.read_text(errors="replace")):
            t = pathlib.PurePosixPath(target)
            if t.parent.name == folder.name and t.stem in sources:
                other = f"{folder.name}/{t.stem}"
                if other != unit:
                    graph.setdefault(unit, set()).add(other)
        graph.setdefault(unit, set())
    return graph


def cycles(graph):
    found, state, stack = [], {}, []

    def visit(u):
        state[u] = "open"
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == "open":
                found.append(stack[stack.index(v):] + [v])
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = "done"

    for u in sorted(graph):
        if u not in state:
            visit(u)
    return found


def main():
    bad = []
    for name in sys.argv[1:]:
        bad += cycles(units(pathlib.Path(name)))
    for c in bad:
        print("include cycle: " + " -> ".join(c))
    print(f"{len(bad)} include cycle(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
