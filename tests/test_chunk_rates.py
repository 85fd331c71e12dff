"""bench/chunk_rates.py on a made-up trace of pinwheel's own layout: three staged copies, each one
program call (cudaMemcpyAsync, 0-1000 us, 1500-2500 us, 2660-3660 us) whose chunk DMAs share its
correlation.  A chunk whose DMA begins before its call returned counts as run while the threads
copy (the call returns once its last chunk is queued: it once compared with the call's start, so
every chunk counted as after); the third copy's DMAs follow the second's without a gap and still
count as a copy of their own; then the medians of the later copies' spans, of the DMA each had
left when its call returned, of the engine's idle time before each and of its longest wait
within one.  A trace without chunks is an error message, no traceback."""
import gzip
import json
import os
import subprocess
import sys
import tempfile

tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "chunk_rates.py")
MIB4 = 4 << 20


def copy(corr, t0, starts, dur):
    call = {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": t0, "dur": 1000.0,
            "args": {"correlation": corr, "pinwheel_staged": 1}}
    dmas = [{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": t0 + s,
             "dur": dur(k), "args": {"correlation": corr, "bytes": MIB4}} for k, s in enumerate(starts)]
    return [call] + dmas


# copy 1: DMAs every 100 us from 50 us, 80 us each while the call runs (to 1000), 60 us after
starts = [50 + 100 * k for k in range(12)]
dur = lambda k: 80.0 if starts[k] < 1000 else 60.0
ev = [e for k, t0 in enumerate((0.0, 1500.0, 2660.0)) for e in copy((1 << 40) + k, t0, starts, dur)]
fails = 0


def check(what, ok):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "t.json.gz")
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": ev}, f)
    p = subprocess.run([sys.executable, tool, path], capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    check("exit 0", p.returncode == 0)
    check("three staged copies of 12 chunks", "36 chunk DMAs of 4194304 bytes in 3 staged copies" in out)
    # chunks 2..9 of each copy begin before its call returned (80 us each), 10..11 after (60 us)
    check("24 DMAs while the threads copy, at 80 us",
          "while the threads copy: 24 DMAs, median 80.0 us" in out)
    check("6 DMAs after, at 60 us", "after the last chunk was queued: 6 DMAs, median 60.0 us" in out)
    # copy 2: 1550 .. 1500+1150+60 = 2710: span 1.16 ms; its call returned at 2500: 0.21 ms left;
    # copy 1 ended at 1210: the engine idle 0.34 ms before copy 2, none before copy 3 (2710)
    check("the later copies' span, DMA left and idle time (median of 0.34 and 0)",
          "staged copies after the first (2): DMA span median 1.16 ms" in out
          and "DMA left when the call returned 0.21 ms, engine idle before each 0.17 ms" in out)
    # within a copy: 20 us between chunks of 80 us, 40 us after chunk 10 (60 us)
    check("the longest wait within a copy", "its longest wait within one 40 us" in out)
    if fails:
        print(out)
    # a chunk whose correlation is not a number (a hostile trace) joins no call: no traceback
    odd = [dict(e, args=dict(e["args"], correlation=[1])) if k == 5 else e for k, e in enumerate(ev)]
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": odd}, f)
    p = subprocess.run([sys.executable, tool, path], capture_output=True, text=True, timeout=60)
    check("an odd correlation: exit 0, no traceback", p.returncode == 0 and "Traceback" not in p.stderr)
    empty = os.path.join(d, "e.json")
    with open(empty, "w") as f:
        json.dump({"traceEvents": [ev[0]]}, f)
    p = subprocess.run([sys.executable, tool, empty], capture_output=True, text=True, timeout=60)
    check("no chunks: an error message, exit non-zero, no traceback",
          p.returncode != 0 and "no host-to-device copy of 4194304 bytes" in p.stderr
          and "Traceback" not in p.stderr)
sys.exit(1 if fails else 0)
