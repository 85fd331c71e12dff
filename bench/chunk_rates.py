#!/usr/bin/env python3
"""How fast do a staged copy's chunk DMAs run while the staging threads still copy, and after?
And where does the DMA engine wait between staged copies?

    python3 bench/chunk_rates.py TRACE.json[.gz] [--bytes 4194304] [--gap-us 300]

For a trace of a program under pinwheel (Kineto's layout, as pinwheel's collector and
torch.profiler write it): the host-to-device copies of exactly --bytes (pinwheel's staging chunks),
grouped into staged copies (a new group after an idle gap of more than --gap-us, or, in pinwheel's
own trace, where the chunks' staged call changes, so that copies back to back stay apart), and for
each group the last call that queued one of its DMAs (joined by args.correlation: in a
torch.profiler trace of pinwheel the chunk's own cudaMemcpyAsync, in pinwheel's own trace the
program's staged call, which returns once its last chunk is queued).  A chunk's DMA that began
before that call ended ran while the threads were still copying the source into pinned memory; one
that began after it ran with the threads done.  Prints the median DMA time and rate of each kind
(the first two chunks of a group left out: their DMA began on an idle engine), so the cost of the
threads' copying to the DMA engine can be read off a real run.  Then, over the staged copies after
the first: the medians of a copy's DMA span (first DMA's start to last one's end) and its rate, of
the DMA time left when its call returned (what the pool still held), of the engine's idle time
before the copy's first DMA (the host's own work between two copies that the DMAs left did not
cover), and of the engine's longest wait between two chunks of one copy.
"""
import argparse
import gzip
import json
import statistics
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            doc = json.load(f)
    except (OSError, ValueError, EOFError) as e:
        sys.exit(f"chunk_rates: {path}: cannot read a JSON trace: {e}")
    ev = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(ev, list):
        sys.exit(f"chunk_rates: {path}: no traceEvents list")
    return [e for e in ev if isinstance(e, dict)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--bytes", type=int, default=4 << 20, help="the staging chunk's size (4 MiB)")
    p.add_argument("--gap-us", type=float, default=300.0, help="idle time that ends a staged copy")
    a = p.parse_args()
    ev = [e for e in load(a.trace) if isinstance(e.get("args"), dict)
          and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur", 0), (int, float))]
    calls = {e["args"]["correlation"]: e for e in ev
             if e.get("cat") in ("cuda_runtime", "cuda_driver")
             and isinstance(e["args"].get("correlation"), int)}
    dmas = sorted((e for e in ev if e.get("cat") == "gpu_memcpy" and "HtoD" in str(e.get("name", ""))
                   and e["args"].get("bytes") == a.bytes and e.get("dur", 0) > 0),
                  key=lambda e: e["ts"])
    if not dmas:
        sys.exit(f"chunk_rates: {a.trace}: no host-to-device copy of {a.bytes} bytes")

    def call_of(e):  # the call that queued this chunk's DMA, or None
        c = e["args"].get("correlation")
        return calls.get(c) if isinstance(c, int) else None

    def staged_call(e):  # in pinwheel's own trace: the program's call whose chunk this is
        c = call_of(e)
        return c["args"]["correlation"] if c is not None and c["args"].get("pinwheel_staged") else None

    def wait(x, y):  # the engine's idle time between two DMAs
        return y["ts"] - (x["ts"] + x["dur"])

    groups = [[dmas[0]]]
    for x, y in zip(dmas, dmas[1:]):
        if wait(x, y) > a.gap_us or staged_call(y) != staged_call(x):
            groups.append([y])
        else:
            groups[-1].append(y)
    during, after, spans, left, idle, waits = [], [], [], [], [], []
    for prev, g in zip([None] + groups, groups):
        end = g[-1]["ts"] + g[-1]["dur"]
        returned = [c["ts"] + c.get("dur", 0) for c in map(call_of, g) if c is not None]
        last = max(returned, default=None)  # when the last call that queued one of them returned
        if prev is not None:
            idle.append(wait(prev[-1], g[0]))
            spans.append((end - g[0]["ts"], sum(e["args"]["bytes"] for e in g)))
            waits.append(max(map(wait, g, g[1:]), default=0))
            if last is not None:
                left.append(end - last)
        if last is not None:
            for e in g[2:]:
                (after if e["ts"] >= last else during).append(e["dur"])
    print(f"{a.trace}: {len(dmas)} chunk DMAs of {a.bytes} bytes in {len(groups)} staged copies")
    for name, v in (("while the threads copy", during), ("after the last chunk was queued", after)):
        if v:
            m = statistics.median(v)
            print(f"  {name}: {len(v)} DMAs, median {m:.1f} us, {a.bytes / m / 1e3:.1f} GB/s")
        else:
            print(f"  {name}: none")
    if spans:
        span = statistics.median(s for s, _ in spans)
        rate = statistics.median(b / s / 1e3 for s, b in spans)
        print(f"  staged copies after the first ({len(spans)}): DMA span median {span / 1e3:.2f} ms "
              f"({rate:.1f} GB/s)", end="")
        if left:
            print(f", DMA left when the call returned {statistics.median(left) / 1e3:.2f} ms", end="")
        print(f", engine idle before each {statistics.median(idle) / 1e3:.2f} ms, its longest wait "
              f"within one {statistics.median(waits):.0f} us")


if __name__ == "__main__":
    main()
