#!/usr/bin/env python3
"""Keep of a torch.profiler trace what pinwheel's analyzer and tests/ref/ref_steps.py read, to make
a small fixture of a real trace: GPU operations (kernel, gpu_memcpy, gpu_memset), runtime and
driver calls (cuda_runtime, cuda_driver), the ProfilerStep annotations and the metadata ("M")
events.  CPU operator events (cpu_op, fwdbwd, python) and flow arrows (ac2g) are dropped;
every kept event is byte-for-byte what the profiler wrote.  --keep-cpu-ops keeps the CPU
operator events too: the what-if's host part is the threads' busy time in them when a trace has
them (report/passes/an_whatif.c).
    trim_trace.py [--keep-cpu-ops] IN.json.gz OUT.json.gz"""
import gzip
import json
import sys

KEEP = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "user_annotation",
        "gpu_user_annotation"}
args = sys.argv[1:]
if args and args[0] == "--keep-cpu-ops":
    KEEP.add("cpu_op")
    args = args[1:]
src, dst = args[0], args[1]
with gzip.open(src, "rt") as f:
    d = json.load(f)
d["traceEvents"] = [e for e in d["traceEvents"] if e.get("ph") == "M" or e.get("cat") in KEEP]
with gzip.open(dst, "wt", compresslevel=9) as f:
    json.dump(d, f, separators=(",", ":"))
