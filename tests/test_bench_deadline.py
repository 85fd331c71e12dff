"""bench.py's --deadline: a class stops after the last whole round that fits, every variant with the
same number of samples, and the tables are told how many rounds they hold (ARGS.reps).  The
benchmark's own runs need a GPU; these stand-ins print what a benchmark prints and sleep."""
import argparse
import importlib.util
import io
import os
import sys
import time

spec = importlib.util.spec_from_file_location(
    "bench", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "bench.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

step = [sys.executable, "-c", "import time; time.sleep(0.4); print('1.5 ms/iter')"]
variants = [("a", step, {}), ("b", step, {})]  # a round: about 0.8 s and two interpreters' start
log = io.StringIO()
fails = 0


def check(what, ok):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok


bench.ARGS = argparse.Namespace(deadline=0, reps=3)
r = bench.interleave(variants, 3, r"([\d.]+) ms/iter", log)
check("no deadline: 3 rounds", [len(v) for v in r.values()] == [3, 3] and bench.ARGS.reps == 3)

bench.START = time.time()
bench.ARGS = argparse.Namespace(deadline=1.5, reps=3)  # the second round fits, not a third
r = bench.interleave(variants, 3, r"([\d.]+) ms/iter", log)
n = [len(v) for v in r.values()]
check(f"deadline 1.5 s: the rounds that fit, the same for every variant ({n})",
      n[0] == n[1] and 1 <= n[0] < 3 and bench.ARGS.reps == n[0])
check("deadline 1.5 s: over in time", time.time() - bench.START < 1.5 + 1.2)
check("samples parsed", all(s == [1.5] for v in r.values() for s in v))
sys.exit(1 if fails else 0)
