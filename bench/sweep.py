#!/usr/bin/env python3
"""Run one command under several environments, interleaved (A B C A B C ...), and print the median
of each number the pattern captures.  For exploring options on the GPU machine:

    python3 bench/sweep.py --reps 3 --pattern '([\\d.]+) ms/step' \\
        --cmd 'python3 samples/train_copybound.py' \\
        --variant 'default:LD_PRELOAD=build/libpinwheel.so' \\
        --variant '12 threads:LD_PRELOAD=build/libpinwheel.so PINWHEEL_THREADS=12'
"""
import argparse
import re
import shlex
import statistics
import subprocess
import sys
import os


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cmd", required=True)
    ap.add_argument("--pattern", required=True)
    ap.add_argument("--variant", action="append", required=True, help="NAME:VAR=VALUE VAR=VALUE ...")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--log", default=None)
    a = ap.parse_args()
    log = open(a.log, "a") if a.log else None
    variants = []
    for v in a.variant:
        name, _, envs = v.partition(":")
        env = dict(kv.split("=", 1) for kv in shlex.split(envs))
        variants.append((name, env))
    res = {name: [] for name, _ in variants}
    for r in range(a.reps):
        for name, env in variants:
            e = dict(os.environ)
            e.update(env)
            p = subprocess.run(shlex.split(a.cmd), env=e, capture_output=True, text=True, timeout=300)
            out = p.stdout + p.stderr
            if log:
                log.write(f"$ {name}: {env} {a.cmd}\n{out}\n")
            m = re.search(a.pattern, out)
            if p.returncode or not m:
                print(f"{name}: failed ({p.returncode})\n{out[-2000:]}", flush=True)
                continue
            res[name].append([float(g) for g in m.groups()])
    width = next((len(s[0]) for s in res.values() if s), 1)
    print(f"| variant | {' | '.join(f'value {i + 1}' for i in range(width))} | rounds of value 1 |")
    for name, samples in res.items():
        if not samples:
            print(f"| {name} | failed |")
            continue
        cols = [statistics.median(s[i] for s in samples) for i in range(len(samples[0]))]
        rounds = ", ".join(f"{s[0]:.2f}" for s in samples)
        print(f"| {name} | " + " | ".join(f"{c:.2f}" for c in cols) + f" | {rounds} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
