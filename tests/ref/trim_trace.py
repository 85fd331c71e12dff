#!/usr/bin/env python3
"""Keep of a torch.profiler trace what pinwheel's analyzer and tests/ref/ref_steps.py read, to make
a small fixture of a real trace: GPU operations (kernel, gpu_memcpy, gpu_memset), runtime and
driver calls (cuda_runtime, cuda_driver), the ProfilerStep annotations and the metadata ("M")
events.  CPU operator events (cpu_op, fwdbwd, python) and flow arrows (ac2g) are dropped;
every kept event is byte-for-byte what the profiler wrote.
    trim_trace.py IN.json.gz OUT.json.gz"""
import gzip
import json
import sys

KEEP = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "user_annotation",
        "gpu_user_annotation"}
src, dst = sys.argv[1], sys.argv[2]
with gzip.open(src, "rt") as f:
    d = json.load(f)
d["traceEvents"] = [e for e in d["traceEvents"] if e.get("ph") == "M" or e.get("cat") in KEEP]
with gzip.open(dst, "wt", compresslevel=9) as f:
    json.dump(d, f, separators=(",", ":"))
