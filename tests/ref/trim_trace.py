#!/usr/bin/env python3
"""Keep of a torch.profiler trace what pinwheel's analyzer and tests/ref/ref_steps.py read, to make
a small fixture of a real trace: GPU operations (kernel, gpu_memcpy, gpu_memset), runtime and
driver calls (cuda_runtime, cuda_driver), the ProfilerStep annotations and the metadata ("M")
events.  CPU operator events (cpu_op, fwdbwd, python) and flow arrows (ac2g) are dropped;
every kept event is byte-for-byte what the profiler wrote.  --keep-cpu-ops keeps the CPU
operator events too: the what-if's host part is the threads' busy time in them when a trace has
them (report/passes/an_whatif.c).  --launches-only keeps, of the runtime and driver calls, those
that launched a GPU operation of the trace (by correlation id) and the synchronizations: a
collector trace holds every API call of the process, most of which launch nothing.
    trim_trace.py [--keep-cpu-ops] [--launches-only] IN.json.gz OUT.json.gz"""
import gzip
import json
import sys

KEEP = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "user_annotation",
        "gpu_user_annotation"}
KEEP.add("cuda_sync")  # synchronizations: the report counts them as the program's host syncs
args = sys.argv[1:]
launches_only = "--launches-only" in args
if "--keep-cpu-ops" in args:
    KEEP.add("cpu_op")
args = [a for a in args if a not in ("--keep-cpu-ops", "--launches-only")]
src, dst = args[0], args[1]
with gzip.open(src, "rt") as f:
    d = json.load(f)
GPU = {"kernel", "gpu_memcpy", "gpu_memset"}
launched = {e.get("args", {}).get("correlation") for e in d["traceEvents"] if e.get("cat") in GPU}


def kept(e):
    if e.get("ph") == "M" or e.get("ph") is None and "cat" not in e:
        return True
    if e.get("cat") not in KEEP:
        return False
    if launches_only and e.get("cat") in ("cuda_runtime", "cuda_driver"):
        return e.get("args", {}).get("correlation") in launched or "ynchronize" in e.get("name", "")
    return True


d["traceEvents"] = [e for e in d["traceEvents"] if kept(e)]
with gzip.open(dst, "wt", compresslevel=9) as f:
    json.dump(d, f, separators=(",", ":"))
