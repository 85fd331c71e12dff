#!/usr/bin/env python3
"""What CUPTI's activity kinds cost the host per CUDA call (bench/cupti_cost.cu), every
configuration in its own process, interleaved over rounds (A B C ... A B C ...), medians.

    python3 bench/cupti_cost.py [--rounds 5] [--configs none,attach,kernel,...] [--md OUT.md]

Needs nvcc and a GPU.  Each process times 20,000 launches of an empty kernel, 20,000 4 KiB
cudaMemcpyAsync and 20,000 cudaEventRecord (in batches of 500, the calls only); "+push" puts each
launch inside an external correlation id, as pinwheel marks its own calls, and counts the kernels
CUPTI linked to one.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

CONFIGS = "none,attach,kernel,memcpy,runtime,driver,gpu,all,attach +push,gpu +push,all +push"
PAT = (r"launch ([\d.]+) us, memcpyAsync ([\d.]+) us, eventRecord ([\d.]+) us; records: kernels (\d+), "
       r"API calls (\d+), external ids (\d+), kernels linked to one (\d+)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--configs", default=CONFIGS, help="comma-separated (default: %(default)s)")
    ap.add_argument("--md", help="also write the table here (markdown)")
    a = ap.parse_args()
    nvcc = shutil.which("nvcc")
    if not nvcc:
        sys.exit("cupti_cost: nvcc not found")
    root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    libdirs = [d for d in (os.path.join(root, "lib64"), os.path.join(root, "lib"),
                           os.path.join(root, "extras", "CUPTI", "lib64")) if os.path.isdir(d)]
    incs = [d for d in (os.path.join(root, "extras", "CUPTI", "include"),) if os.path.isdir(d)]
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cupti_cost.cu")
    with tempfile.TemporaryDirectory(prefix="pw-cupti-cost-") as tdir:
        exe = os.path.join(tdir, "cupti_cost")
        cmd = [nvcc, "-O2", src, "-o", exe, "-lcupti"] + [f"-I{d}" for d in incs] + \
              [f"-L{d}" for d in libdirs] + [f"-Xlinker=-rpath,{d}" for d in libdirs]
        b = subprocess.run(cmd, capture_output=True, text=True)
        if b.returncode:
            sys.exit(f"cupti_cost: build failed:\n{b.stdout}{b.stderr}")
        configs = a.configs.split(",")
        res = {c: [] for c in configs}
        for r in range(a.rounds):
            for c in configs:
                try:
                    p = subprocess.run([exe] + c.split(), capture_output=True, text=True, timeout=120)
                    out = p.stdout + p.stderr
                except subprocess.TimeoutExpired:
                    p, out = None, "timed out"
                m = re.search(PAT, out)
                if not p or p.returncode or not m:
                    print(f"  round {r + 1} {c}: failed ({p.returncode if p else 'timeout'}): {out.strip()}",
                          flush=True)
                    continue
                res[c].append([float(x) for x in m.groups()])
                print(f"  round {r + 1} {c}: {p.stdout.strip()}", flush=True)
            table(res, a.md, r + 1)  # after every round: a run cut short keeps what it measured
    sys.exit(0 if all(res.values()) else 1)


def table(res, md_path, rounds):
    """The medians so far; each configuration's extra time per call against none (CUPTI unused)
    and, for one kind alone, against attach (which each such configuration includes)."""
    med = lambda v, i: statistics.median(x[i] for x in v)

    def delta(c, v, i):
        out = []
        for b in ("none", "attach"):
            if c != b and res.get(b) and (b == "none" or c in ("kernel", "memcpy", "runtime", "driver")):
                out.append(f"{med(v, i) - med(res[b], i):+.2f} vs {b}")
        return f"{med(v, i):.2f}" + (f" ({', '.join(out)})" if out else "")

    head = ["configuration", "us per launch", "us per memcpyAsync", "us per eventRecord",
            "kernels linked to an external id"]
    rows = [[c] + [delta(c, v, i) for i in range(3)] + [f"{med(v, 6):.0f} of {med(v, 3):.0f}" if "+push" in c else ""]
            for c, v in res.items() if v]
    md = [f"Medians of {rounds} round(s), one process per configuration and round:", "",
          f"| {' | '.join(head)} |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    print("\n".join(md), flush=True)
    if md_path:
        with open(md_path, "w") as f:
            f.write("\n".join(md) + "\n")

if __name__ == "__main__":
    main()
