#!/usr/bin/env python3
"""The analyzer's output shown in the README (and in docs/) is what the analyzer prints today.

Every fenced block of README.md and of the other documents given that starts with a report or diff header naming a trace under
tests/fixtures/ is re-run: `pinwheel report: PATH (...)` -> `pinwheel report PATH`, and
`pinwheel diff` / `before: A` / `after: B` -> `pinwheel diff A B`.  A block may leave lines
out (the README says so where it does), so its lines must appear in the live output in the
same order, each whole; any line that does not is reported with the live line nearest to it.

usage: test_readme_outputs.py PINWHEEL_CLI README.md [DOC.md...]
(fixture paths are relative to README.md's directory, the repository's root)
"""
import difflib
import os
import re
import subprocess
import sys


def blocks(text):
    out, cur, inside = [], [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            if inside:
                out.append(cur)
            cur, inside = [], not inside
        elif inside:
            cur.append(line)
    return out


def command(block):
    m = re.match(r"pinwheel report: (tests/fixtures/\S+) \(", block[0])
    if m:
        return ["report", m.group(1)]
    if block[0] == "pinwheel diff" and len(block) > 2:
        b = re.match(r"\s+before: (tests/fixtures/\S+)$", block[1])
        a = re.match(r"\s+after:\s+(tests/fixtures/\S+)$", block[2])
        if a and b:
            return ["diff", b.group(1), a.group(1)]
    return None


def check(cli, root, block, cmd):
    """Returns the README lines that are not, in order, lines of the live output."""
    run = subprocess.run([cli] + cmd, cwd=root, capture_output=True, text=True)
    if run.returncode != 0:
        return [f"`pinwheel {' '.join(cmd)}` exited {run.returncode}: {run.stderr.strip()}"]
    live = run.stdout.rstrip("\n").split("\n")
    bad, at = [], 0
    for line in block:
        if not line.strip():
            continue
        try:
            at = live.index(line, at) + 1
        except ValueError:
            near = difflib.get_close_matches(line, live, n=1, cutoff=0.3)
            bad.append(f"README: {line!r}\n   now: {near[0] if near else '(nothing like it)'!r}")
    return bad


def main():
    cli, readme = os.path.abspath(sys.argv[1]), sys.argv[2]
    root = os.path.dirname(os.path.abspath(readme))
    checked, failed = 0, 0
    for doc in sys.argv[2:]:
        for block in blocks(open(doc).read()):
            cmd = block and command(block)
            if not cmd:
                continue
            checked += 1
            bad = check(cli, root, block, cmd)
            if bad:
                failed += 1
                print(f"{os.path.basename(doc)} block `pinwheel {' '.join(cmd)}` differs from the "
                      "analyzer's output:")
                print("\n".join(bad))
    print(f"{checked} output blocks of {len(sys.argv) - 2} documents checked, {failed} differ")
    if checked == 0:
        print("no block names a fixture: the parser no longer finds them")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
