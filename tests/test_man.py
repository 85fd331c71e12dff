#!/usr/bin/env python3
"""The pinwheel(1) man page says what `pinwheel --help` says.

Every line that `pinwheel --help`, `pinwheel COMMAND --help` and `pinwheel options --help` print
is a line of the page (roff escapes undone), every option of `pinwheel options` and every
threshold of `pinwheel report --help` is an entry with its default, and groff, when installed,
formats the page without a warning.

usage: test_man.py PINWHEEL_CLI PAGE   (PAGE: pinwheel.1, or pinwheel.1.gz)
"""
import gzip
import re
import shutil
import subprocess
import sys


# --help's headings and the page's sections that hold the same text
HEADINGS = {"exit status:": ".SH EXIT STATUS", "more:": ".SH SEE ALSO"}


def run(*args):
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def main():
    cli, page = sys.argv[1], sys.argv[2]
    raw = gzip.open(page, "rt").read() if page.endswith(".gz") else open(page).read()
    text = raw.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")
    lines = set(text.split("\n"))
    bad = []
    if not raw.startswith(".TH PINWHEEL 1 "):
        bad.append("the page does not start with .TH PINWHEEL 1")
    helps = [("--help",), ("run", "--help"), ("options", "--help")]
    commands = re.findall(r"^  ([a-z]+)(?: |$)", run(cli, "--help"), re.M)
    if "report" in commands:
        helps += [("report", "--help"), ("diff", "--help"), ("export", "--help")]
    for args in helps:
        for line in run(cli, *args).split("\n"):
            if args == ("report", "--help") and re.match(r"  \S+ +[0-9.e+-]+ ", line):
                continue  # the thresholds: entries, checked below
            if line.strip() and HEADINGS.get(line, line) not in lines:
                bad.append(f"`pinwheel {' '.join(args)}` prints {line!r}, the page does not")
    for cmd in commands:
        if f".SS {cmd}" not in lines:
            bad.append(f"no section for the command {cmd}")
    for row in run(cli, "options").split("\n")[1:]:
        if row.strip():
            name, default = row.split()[:2]
            if f".B {name}" not in lines or f"(default: {default}) " not in text:
                bad.append(f"the option {name} (default {default}) is not an entry")
    if "report" in commands:
        for m in re.finditer(r"^  (\S+) +([0-9.e+-]+) ", run(cli, "report", "--help"), re.M):
            if f".B {m.group(1)}" not in lines or f"(default: {m.group(2)}" not in text:
                bad.append(f"the threshold {m.group(1)} ({m.group(2)}) is not an entry")
    if shutil.which("groff"):
        fmt = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z"], input=raw.encode(),
                             capture_output=True)
        if fmt.returncode or fmt.stderr:
            bad.append(f"groff: {fmt.stderr.decode().strip()}")
    print("\n".join(bad) if bad else f"the man page says what --help says ({len(helps)} texts)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
