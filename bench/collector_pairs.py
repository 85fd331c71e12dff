#!/usr/bin/env python3
"""The copy-bound loop (samples/train_copybound.py, 100 steps, under pinwheel) untraced and traced,
interleaved, with what each process spent: pinwheel's staging copies and waits (its JSON summary)
and every thread's CPU time and involuntary context switches (/proc, read at the interpreter's
exit), grouped by thread name and scheduling policy (5: SCHED_IDLE, the trace writer).

    python3 bench/collector_pairs.py --build build-dev --reps 6 [--threads 15]

--threads N adds both variants with PINWHEEL_THREADS=N.  Runs through bench.py's interleave (a
failed run stops it, its output in --log); prints one line per run, then per variant its median,
each round's ratio to its untraced run and the best run against the best.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (interleave, stats_env: the benchmark's own runner)

WRAP = r'''
import atexit, json, os, runpy, sys
def dump():
    rows = []
    for t in os.listdir("/proc/self/task"):
        try:
            comm = open(f"/proc/self/task/{t}/comm").read().strip()
            st = open(f"/proc/self/task/{t}/stat").read()
            f = st[st.rindex(")") + 2:].split()
            status = open(f"/proc/self/task/{t}/status").read()
            nv = int(status.split("nonvoluntary_ctxt_switches:")[1].split()[0])
            rows.append([comm, int(f[11]) + int(f[12]), int(f[38]), nv])
        except (OSError, ValueError, IndexError):
            pass
    with open(os.environ["PW_PAIRS_THREADS"], "w") as fh:
        json.dump(rows, fh)
atexit.register(dump)
sys.argv = ["samples/train_copybound.py"] + sys.argv[1:]
sys.path.insert(0, "samples")
runpy.run_path("samples/train_copybound.py", run_name="__main__")
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build-dev")
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=0, help="also run with this many staging threads")
    ap.add_argument("--log", default=os.devnull, help="every run's output")
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    tick = os.sysconf("SC_CLK_TCK")
    with tempfile.TemporaryDirectory(prefix="pw-pairs-") as tdir, open(a.log, "w") as log:
        wrap = os.path.join(tdir, "wrap.py")
        with open(wrap, "w") as f:
            f.write(WRAP)
        thr, st, tr = (os.path.join(tdir, n) for n in ("threads.json", "stats.json", "t.json.gz"))
        shim = dict(bench.stats_env(st), LD_PRELOAD=os.path.join(b, "libpinwheel.so"), PINWHEEL_MODE="stage",
                    PW_PAIRS_THREADS=thr)
        traced = lambda e: dict(e, PINWHEEL_TRACE=tr, NVTX_INJECTION64_PATH=os.path.join(b, "libpinwheel_nvtx.so"))
        envs = [("untraced", shim), ("traced", traced(shim))]
        if a.threads:
            n = dict(shim, PINWHEEL_THREADS=str(a.threads))
            envs += [(f"untraced {a.threads} threads", n), (f"traced {a.threads} threads", traced(n))]
        cmd = [sys.executable, wrap, "--iters", "100", "--mode", "naive"]

        def after(name, env, secs):  # what the run spent: pinwheel's summary, every thread's CPU
            size = os.path.getsize(tr) if os.path.exists(tr) else 0
            s, groups = {}, {}
            if os.path.exists(st):
                with open(st) as f:
                    s = json.load(f).get("staging", {})
            if os.path.exists(thr):
                with open(thr) as f:
                    for comm, ticks, pol, nv in json.load(f):
                        g = groups.setdefault(f"{comm}/{pol}", [0, 0, 0])
                        g[0] += 1
                        g[1] += ticks
                        g[2] += nv
            for f in (tr, st, thr):
                if os.path.exists(f):
                    os.unlink(f)
            print(f"    trace {size / 2**20:.1f} MiB; staging copies {s.get('memcpy_ns', 0) / 1e6:.0f} ms, waits for "
                  f"space {s.get('wait_space_ns', 0) / 1e6:.0f} ms ({s.get('wait_space_events', 0)})", flush=True)
            print("    threads: " + "; ".join(f"{k} x{g[0]} cpu {g[1] * 1000 // tick} ms invol {g[2]}"
                                              for k, g in sorted(groups.items(), key=lambda kv: -kv[1][1])), flush=True)

        res = bench.interleave([(n, cmd, e) for n, e in envs], a.reps,
                               r"([\d.]+) ms/step, loss [-\d.]+, bytes ok", log, after)
        for name, v in res.items():
            v = [x[0] for x in v]
            base = [x[0] for x in res[name.replace("traced", "untraced", 1)]] if name.startswith("traced") else v
            pr = [x / y - 1 for x, y in zip(v, base)]
            print(f"{name:28s} median {statistics.median(v):.2f} ms/step; against its untraced run "
                  f"{', '.join(f'{100 * x:+.1f}' for x in pr)}: median {100 * statistics.median(pr):+.1f} %, "
                  f"best/best {100 * (min(v) / min(base) - 1):+.1f} %", flush=True)


if __name__ == "__main__":
    main()
