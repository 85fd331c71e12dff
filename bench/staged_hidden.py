#!/usr/bin/env python3
"""Per staged copy: how much of its DMA ran under a kernel, and how much could have.

    python3 bench/staged_hidden.py [--min-mib 50] [--skip N] TRACE.json[.gz] ...

Reads a trace of `pinwheel run --trace` (or torch.profiler) and groups the host-to-device DMAs by
the correlation id of the program's call (pinwheel's collector gives every DMA chunk of a staged
copy that id).  For each copy of at least --min-mib: its DMA time, the part of it that overlapped
a kernel (hidden), and the kernel time between the program's call and the end of its last DMA
(no placement of the DMA inside that window could hide more: the bound).  The summary line
leaves out the first --skip copies (set-up and warm-up, when the GPU had nothing to run).
"""
import argparse
import bisect
import gzip
import json


def load(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        return json.load(f)["traceEvents"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--min-mib", type=float, default=50)
    ap.add_argument("--skip", type=int, default=0, help="copies left out of the summary, from the first")
    a = ap.parse_args()
    for path in a.traces:
        ev = load(path)
        busy_iv = []
        for s, e in sorted((x["ts"], x["ts"] + x["dur"]) for x in ev if x.get("cat") == "kernel"):
            if busy_iv and s <= busy_iv[-1][1]:
                busy_iv[-1][1] = max(busy_iv[-1][1], e)
            else:
                busy_iv.append([s, e])
        starts = [s for s, _ in busy_iv]

        def busy(s, e):
            i, t = max(0, bisect.bisect_right(starts, s) - 1), 0.0
            while i < len(busy_iv) and busy_iv[i][0] < e:
                t += max(0.0, min(e, busy_iv[i][1]) - max(s, busy_iv[i][0]))
                i += 1
            return t

        groups, calls = {}, {}
        for x in ev:
            args = x.get("args", {})
            if x.get("cat") == "gpu_memcpy" and "HtoD" in x.get("name", ""):
                groups.setdefault(args.get("correlation"), []).append(x)
            elif x.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in args:
                calls.setdefault(args["correlation"], x)
        rows = []
        for corr, dmas in groups.items():
            nbytes = sum(x["args"].get("bytes", 0) for x in dmas)
            if nbytes < a.min_mib * 2**20:
                continue
            first = min(x["ts"] for x in dmas)
            end = max(x["ts"] + x["dur"] for x in dmas)
            t0 = calls[corr]["ts"] if corr in calls else first
            dma = sum(x["dur"] for x in dmas)
            hidden = sum(busy(x["ts"], x["ts"] + x["dur"]) for x in dmas)
            rows.append((t0, nbytes, dma, hidden, busy(t0, end), end - t0))
        rows.sort()
        print(f"{path}: {len(rows)} copies of at least {a.min_mib:g} MiB")
        for t0, nbytes, dma, hidden, kern, win in rows:
            print(f"  {nbytes / 2**20:8.1f} MiB  DMA {dma / 1e3:6.2f} ms  hidden {100 * hidden / dma:5.1f} %  "
                  f"kernels {kern / 1e3:6.2f} ms of the {win / 1e3:6.2f} ms from the call to its last DMA "
                  f"(bound {100 * min(1.0, kern / dma):5.1f} %)")
        kept = rows[a.skip:]
        if kept:
            dma = sum(r[2] for r in kept)
            print(f"  copies {a.skip + 1}..{len(rows)}: {100 * sum(r[3] for r in kept) / dma:.1f} % hidden, "
                  f"bound {100 * sum(min(r[4], r[2]) for r in kept) / dma:.1f} %")


if __name__ == "__main__":
    main()
