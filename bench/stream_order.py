#!/usr/bin/env python3
"""Do a trace's GPU operations run, stream by stream, in the order of the calls that issued them?

    python3 bench/stream_order.py TRACE.json[.gz] ...

For each trace (Kineto's layout, as pinwheel's collector and torch.profiler write it): the kernels,
copies and memsets with a call of their own (joined by args.correlation), per stream in the order
they ran; an operation whose call started before the previous operation's call is out of order.
Also which calls issued the operations.  A collector that recorded no API calls of CUPTI's and
joined CUPTI's GPU records to the calls pinwheel intercepts by each stream's order would need
none out of order, and every call that issues GPU work intercepted.
"""
import collections
import gzip
import json
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    bad_any = False
    for path in sys.argv[1:]:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            ev = json.load(f)["traceEvents"]
        calls, ops = {}, collections.defaultdict(list)
        for e in ev:
            a = e.get("args", {})
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in a:
                calls[a["correlation"]] = e
        for e in ev:
            a = e.get("args", {})
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "correlation" in a:
                ops[a.get("stream")].append(e)
        joined = out_of_order = without = 0
        issuers = collections.Counter()
        for stream_ops in ops.values():
            stream_ops.sort(key=lambda e: e["ts"])
            last = None
            for e in stream_ops:
                c = calls.get(e["args"]["correlation"])
                if not c:
                    without += 1
                    continue
                joined += 1
                issuers[c["name"]] += 1
                out_of_order += last is not None and c["ts"] < last
                last = c["ts"]
        bad_any |= out_of_order > 0
        print(f"{path}: {joined} operations joined to their calls on {len(ops)} streams, {out_of_order} out of "
              f"order, {without} without a call; issued by " +
              ", ".join(f"{n} {k}" for k, n in issuers.most_common()))
    sys.exit(1 if bad_any else 0)


if __name__ == "__main__":
    main()
