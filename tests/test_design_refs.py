#!/usr/bin/env python3
"""Every "DESIGN.md §N" in the repository names a numbered section of docs/DESIGN.md.

Sources, scripts, tests and documents cite the design by section ("DESIGN.md §5", "DESIGN.md
§2–3", "DESIGN.md §5.2"); inside docs/DESIGN.md a bare "§N" refers to the file itself.  A
section is a heading "## N. Title" (or "### N.M Title").  The check fails, naming file and line,
when a reference names a section that does not exist, and when the table of contents at the top
of DESIGN.md lists other sections than the headings.  It also checks itself: a made-up reference
must be caught.

usage: test_design_refs.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys

DESIGN = os.path.join("docs", "DESIGN.md")
SELF = os.path.join("tests", os.path.basename(__file__))
HEADING = re.compile(r"^#{2,3} (\d+)(?:\.(\d+))?[. ]")
REF = re.compile(r"DESIGN\.md\s*§\s*(\d+(?:\.\d+)?)(?:\s*[–-]\s*(\d+(?:\.\d+)?))?")
SELF_REF = re.compile(r"§\s*(\d+(?:\.\d+)?)(?:\s*[–-]\s*(\d+(?:\.\d+)?))?")
TOC = re.compile(r"^(\d+)\. \[(.+)\]\(#")


def sections(text):
    """The section numbers ("5", "5.2") of DESIGN.md's headings, and their titles."""
    found = {}
    for line in text.split("\n"):
        m = HEADING.match(line)
        if m:
            num = m.group(1) + ("." + m.group(2) if m.group(2) else "")
            found[num] = line.lstrip("#").strip()[len(num):].lstrip(". ").strip()
    return found


def bad_refs(text, pattern, known):
    """(line number, reference) for every reference to a section not in known."""
    out = []
    for no, line in enumerate(text.split("\n"), 1):
        for m in pattern.finditer(line):
            for num in (m.group(1), m.group(2)):
                if num and num not in known:
                    out.append((no, m.group(0)))
    return out


def files(root):
    """The repository's files: git's list when there is one, else a walk of the tree."""
    try:
        run = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True)
        names = [n for n in run.stdout.decode().split("\0") if n]
        if names:
            return names
    except (OSError, subprocess.CalledProcessError):
        pass
    names = []
    for d, subdirs, fs in os.walk(root):
        subdirs[:] = [s for s in subdirs if not s.startswith((".", "build"))]
        names += [os.path.relpath(os.path.join(d, f), root) for f in fs]
    return names


def main():
    root = sys.argv[1]
    design = open(os.path.join(root, DESIGN), encoding="utf-8").read()
    known = sections(design)
    fail = 0
    if not known:
        print(f"{DESIGN} has no numbered section")
        return 1
    toc = [(m.group(1), m.group(2)) for m in map(TOC.match, design.split("\n")) if m]
    tops = [(n, t) for n, t in known.items() if "." not in n]
    if toc != tops:
        print(f"{DESIGN}: the table of contents {toc} is not the headings {tops}")
        fail = 1
    refs = 0
    for name in files(root):
        path = os.path.join(root, name)
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary files, fixtures
        if name == SELF:
            continue  # its examples are not references
        pattern = SELF_REF if name == DESIGN else REF
        refs += len(pattern.findall(text))
        for no, ref in bad_refs(text, pattern, known):
            print(f"{name}:{no}: '{ref}' names no section of {DESIGN}")
            fail = 1
    # the check itself: a made-up section and a range past the end must be caught
    if not bad_refs("see DESIGN.md §99", REF, known) or not bad_refs("DESIGN.md §2–99", REF, known):
        print("the check does not catch a reference to a missing section")
        fail = 1
    print(f"{refs} references to {len(known)} sections of {DESIGN} checked")
    return fail


if __name__ == "__main__":
    sys.exit(main())
