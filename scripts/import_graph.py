#!/usr/bin/env python3
"""import_graph.py — the include graph of shim/, report/ and cmd/, held against its one direction.

Reads every `#include "..."` of the C sources and headers (and .def lists) under shim/, report/
and cmd/, and fails (exit status 1), naming each offending include, when
  (a) files include one another in a circle, or
  (b) a folder includes from a folder it must not depend on (LAYERS below: shim/README.md, core <
      engine < fill, collector < front < the top file shim/pinwheel.c; report/README.md, the model
      report/an.h and an_model.c < readers, passes < writers < cmd; common/ below both halves).
An include is resolved as the compiler does for quotes: the including file's folder first, then
the one file of the scanned tree with that name.  A name no file of the tree bears is generated
by the build (GENERATED) or an error.

  scripts/import_graph.py [ROOT]     check the tree at ROOT (default: this repository)
  scripts/import_graph.py --self-test
                                     check small trees made for it: a clean one must pass, a
                                     wrong-way include and a circle must each fail
"""
import os
import re
import sys
import tempfile

SCANNED = ("shim", "report", "cmd", "common")
SUFFIXES = (".c", ".h", ".def")
GENERATED = {"pw_hook_ids.def"}  # CMakeLists.txt: from shim/front's two hook lists

# Each folder (or single file) and what it may include besides itself.  A file's layer is the
# longest entry that is its path or a folder above it.
LAYERS = {
    "shim/core": set(),
    "shim/engine": {"shim/core"},
    "shim/fill": {"shim/core", "shim/engine"},  # fill-ahead: over the engine's pw_ops and guard
    "common": set(),  # what both halves include (pw_driver_calls.h, the loop finder pw_loop.h)
    "shim/collector": {"shim/core", "shim/engine", "common"},  # pw_driver_calls.h, pw_loop.h
    "shim/front": {"shim/core", "shim/engine", "shim/fill", "shim/collector"},
    "shim/pinwheel.c": {"shim/core", "shim/engine", "shim/fill", "shim/collector", "shim/front"},
    "report/an.h": set(),
    "report/an_model.c": {"report/an.h"},
    "report/readers": {"report/an.h", "common"},  # pw_demangle.h
    # pw_driver_calls.h: the driver calls the collector records, one list for the analyzer too
    "report/passes": {"report/an.h", "common"},
    "report/writers": {"report/an.h"},
    "cmd": {"shim/core", "report/an.h", "report/writers"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def layer_of(path):
    best = None
    for name in LAYERS:
        if path == name or path.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


def allowed(src_layer, target):
    if layer_of(target) == src_layer:
        return True
    for dep in LAYERS[src_layer]:
        if target == dep or target.startswith(dep + "/"):
            return True
    return False


def scan(root):
    files = []
    for top in SCANNED:
        for d, dirs, names in os.walk(os.path.join(root, top)):
            dirs.sort()
            for n in sorted(names):
                if n.endswith(SUFFIXES):
                    files.append(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/"))
    by_name = {}
    for f in files:
        by_name.setdefault(os.path.basename(f), []).append(f)
    edges = {f: [] for f in files}  # file -> [(line, included file)]
    errors = []
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        # comments out, line numbers kept
        text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            here = os.path.normpath(os.path.join(os.path.dirname(f), inc)).replace(os.sep, "/")
            if here in edges:
                target = here
            elif len(by_name.get(os.path.basename(inc), [])) == 1:
                target = by_name[os.path.basename(inc)][0]
            elif os.path.basename(inc) in GENERATED:
                continue
            elif by_name.get(os.path.basename(inc)):
                errors.append('%s:%d: #include "%s" could mean %s' %
                              (f, line, inc, " or ".join(by_name[os.path.basename(inc)])))
                continue
            else:
                errors.append('%s:%d: #include "%s": no such file in %s' %
                              (f, line, inc, ", ".join(SCANNED)))
                continue
            edges[f].append((line, target))
    return files, edges, errors


def check_layers(files, edges):
    errors = []
    for f in files:
        src = layer_of(f)
        if src is None:
            errors.append("%s: in no layer of import_graph.py's LAYERS: add it there" % f)
            continue
        for line, target in edges[f]:
            if layer_of(target) is None:
                continue  # reported for the target itself
            if not allowed(src, target):
                errors.append('%s:%d: #include "%s": %s must not depend on %s (it may use: %s)' %
                              (f, line, os.path.basename(target), src, layer_of(target),
                               ", ".join(sorted(LAYERS[src])) or "nothing outside itself"))
    return errors


def check_cycles(files, edges):
    """Every circle of includes, each once, as the chain of includes that closes it."""
    errors, state, stack, seen = [], {}, [], set()

    def visit(f):
        state[f] = 1
        stack.append(f)
        for line, t in edges[f]:
            if state.get(t) == 1:
                ring = stack[stack.index(t):]
                key = frozenset(ring)
                if key not in seen:
                    seen.add(key)
                    hops = []
                    for a, b in zip(ring, ring[1:] + [t]):
                        ln = next(l for l, x in edges[a] if x == b)
                        hops.append('%s:%d includes "%s"' % (a, ln, os.path.basename(b)))
                    errors.append("include circle: " + " -> ".join(hops))
            elif t not in state:
                visit(t)
        stack.pop()
        state[f] = 2

    for f in files:
        if f not in state:
            visit(f)
    return errors


def check(root):
    files, edges, errors = scan(root)
    errors += check_cycles(files, edges)
    errors += check_layers(files, edges)
    return files, edges, errors


def main(root):
    files, edges, errors = check(root)
    if errors:
        print("import_graph: %d problem(s) in the includes of %s:" % (len(errors), ", ".join(SCANNED)))
        for e in errors:
            print("  " + e)
        print("the allowed direction: scripts/import_graph.py (LAYERS), shim/README.md, report/README.md")
        return 1
    n = sum(len(v) for v in edges.values())
    print("import_graph: %d files, %d includes: no circle, every include in the allowed direction"
          % (len(files), n))
    return 0


def self_test():
    def tree(d, content):
        for path, text in content.items():
            p = os.path.join(d, path)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as fh:
                fh.write(text)

    clean = {
        "shim/core/pw.h": '#include <stddef.h>\n#include "pw_hook_ids.def"\n',
        "shim/core/log.c": '#include "pw.h"\n',
        "shim/engine/engine.h": '#include "pw.h"\n',
        "shim/front/front.h": '#include "engine.h"\n/* #include "pinwheel.h" (a comment) */\n',
        "shim/pinwheel.c": '#include "front.h"\n',
        "report/an.h": "\n",
        "report/passes/p.c": '#include "an.h"\n#include "pw_driver_calls.h"\n',
        "common/pw_driver_calls.h": "\n",
        "cmd/run.c": '#include "pw.h"\n',
    }
    cases = [
        ("clean", {}, None),
        ("wrong way", {"shim/core/log.c": '#include "pw.h"\n#include "engine.h"\n'},
         'shim/core/log.c:2: #include "engine.h": shim/core must not depend on shim/engine'),
        ("circle", {"shim/engine/engine.h": '#include "pw.h"\n#include "numa.h"\n',
                    "shim/engine/numa.h": '#include "engine.h"\n'}, "include circle: "),
        ("fill wrong way", {"shim/fill/fa.h": '#include "pw.h"\n',
                            "shim/engine/engine.h": '#include "pw.h"\n#include "fa.h"\n'},
         'shim/engine/engine.h:2: #include "fa.h": shim/engine must not depend on shim/fill'),
        ("fill under front", {"shim/fill/fa.h": '#include "front.h"\n'},
         'shim/fill/fa.h:1: #include "front.h": shim/fill must not depend on shim/front'),
        ("report wrong way", {"report/an.h": '#include "an_out.h"\n',
                              "report/writers/an_out.h": "\n"},
         'report/an.h:1: #include "an_out.h": report/an.h must not depend on report/writers'),
        ("unknown file", {"shim/front/front.h": '#include "nowhere.h"\n'},
         '#include "nowhere.h": no such file'),
    ]
    failed = 0
    for name, change, expect in cases:
        with tempfile.TemporaryDirectory() as d:
            tree(d, dict(clean, **change))
            _, _, errors = check(d)
        ok = not errors if expect is None else any(expect in e for e in errors)
        print("self-test %-16s %s%s" % (name, "ok" if ok else "FAILED",
                                        "" if ok else ": " + repr(errors)))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(here)))
