#!/usr/bin/env python3
"""An independent computation of the per-step figures of DESIGN.md §5 from a torch.profiler
trace, written from the definitions alone (no code shared with the analyzer), used as the
reference the analyzer's `steps` must equal:

    ref_steps.py TRACE.json[.gz]            prints JSON: [{num, devices: {dev: {...}}}]

A step's GPU work: every kernel / memcpy / memset whose runtime call (joined by correlation id)
started inside the step's CPU range ProfilerStep#N, on any host thread.  Per step and device:
gpu_step_ns = end of the step's last GPU op - end of the previous step's last GPU op (first
step: - its first op's start); h2d time = |union of the step's H2D copies|, hidden = its overlap
with the union of all kernels of the device (communication kernels excluded)."""
import gzip
import json
import re
import sys
from decimal import Decimal

COMM = re.compile(r"nccl|ncclDevKernel|ncclKernel|all_reduce|allreduce|allgather|reduce_scatter", re.I)


def ns(x):  # exact: the trace's µs carry ns in their decimals
    return int((Decimal(str(x)) * 1000).to_integral_value())


def union(iv):
    out = []
    for s, e in sorted(iv):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def inter(a, b):
    i = j = t = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            t += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return t


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        d = json.load(f)
    return d["traceEvents"] if isinstance(d, dict) else d


def main():
    ev = load(sys.argv[1])
    steps, calls, ops = {}, {}, []
    for e in ev:
        if e.get("ph") != "X":
            continue
        cat, name = e.get("cat"), e.get("name", "")
        if cat in ("user_annotation", "cpu_op") and name.startswith("ProfilerStep#"):
            steps.setdefault(int(name[13:]), (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
        elif cat in ("cuda_runtime", "cuda_driver", "Runtime"):
            c = e.get("args", {}).get("correlation")
            if c is not None:
                calls[c] = ns(e["ts"])
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"):
            a = e.get("args", {})
            s = ns(e["ts"])
            ops.append(dict(s=s, e=s + ns(e["dur"]), dev=a.get("device", e.get("pid")),
                            cat=cat.lower(), name=name, corr=a.get("correlation")))
    order = sorted(steps.items(), key=lambda kv: kv[1][0])
    kern = {}
    for o in ops:
        if o["cat"] == "kernel" and not COMM.search(o["name"]):
            kern.setdefault(o["dev"], []).append((o["s"], o["e"]))
    kern = {d: union(v) for d, v in kern.items()}
    per = {}
    for o in ops:
        cs = calls.get(o["corr"])
        if cs is None:
            continue
        for num, (s, e) in order:
            if s <= cs < e:
                per.setdefault(num, {}).setdefault(o["dev"], []).append(o)
                break
    out, last = [], {}
    for num, _ in order:
        devs = {}
        for dev, lst in sorted(per.get(num, {}).items()):
            first_s = min(o["s"] for o in lst)
            last_e = max(o["e"] for o in lst)
            h2d = union([(o["s"], o["e"]) for o in lst
                         if o["cat"] == "gpu_memcpy" and o["name"].startswith("Memcpy HtoD")])
            t = sum(e - s for s, e in h2d)
            hid = inter(h2d, kern.get(dev, []))
            devs[str(dev)] = dict(gpu_step_ns=last_e - last.get(dev, first_s), h2d_ns=t, h2d_hidden_ns=hid,
                                  kernels=sum(1 for o in lst if o["cat"] == "kernel"))
            last[dev] = last_e
        out.append(dict(num=num, devices=devs))
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
