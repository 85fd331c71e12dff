"""A trace written by `pinwheel run --trace` (PINWHEEL_TRACE) on the GPU: complete, valid JSON
(gzip by the name), as Kineto writes it, with what the mode implies.
    python3 tests/gpu/check_trace.py TRACE MODE H2D_COPIES [STEPS]
MODE off|observe: at least H2D_COPIES host-to-device copies from pageable memory, none issued by
pinwheel; stage: at least H2D_COPIES copies staged (pinwheel's marker on the operations it
issued, each joined to the program's call by its correlation id), no pageable copy of 64 KiB or
more sent to CUDA unchanged (the first one sets the pool up and waits for it), DMA chunks from
pinned memory on pinwheel's side stream, and nothing dropped.  STEPS: the program marks each step with an NVTX range
`train_step#N` (N = 0 .. STEPS-1), and every one of them is in the trace as an annotation."""
import gzip
import json
import sys

path, mode, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 0
opener = gzip.open if path.endswith(".gz") else open
with opener(path, "rt") as f:
    t = json.load(f)
ev = t["traceEvents"]
gpu = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy"]
h2d_pageable = [e for e in gpu if e["name"].startswith("Memcpy HtoD (Pageable")]
ours = [e for e in ev if e.get("args", {}).get("pinwheel")]
staged_calls = {e["args"].get("correlation") for e in ev if e.get("args", {}).get("pinwheel_staged")}
side = [e for e in ev if e.get("ph") == "M" and "pinwheel side" in json.dumps(e.get("args", {}))]
chunks = [e for e in gpu if e["name"].startswith("Memcpy HtoD (Pinned") and e.get("args", {}).get("pinwheel")]
dropped = t.get("pinwheel", {}).get("dropped_records", 0)
ranges = {e["name"] for e in ev if e.get("cat") == "user_annotation" and e.get("ph") == "X"}
missing = [n for n in (f"train_step#{i}" for i in range(steps)) if n not in ranges]
print(f"{path}: {len(ev)} events, {len(gpu)} GPU copies, pageable H2D {len(h2d_pageable)}, "
      f"issued by pinwheel {len(ours)}, staged calls {len(staged_calls)}, DMA chunks {len(chunks)}, "
      f"side stream named {bool(side)}, dropped {dropped}, NVTX ranges {len(ranges)}")
if missing:
    print(f"{len(missing)} of {steps} step ranges missing, the first {missing[0]}")
if mode in ("off", "observe"):
    ok = len(h2d_pageable) >= want and not ours and not staged_calls
else:
    # every large copy is staged (the first one sets the pool up and waits for it); the small
    # ones below PINWHEEL_MIN_BYTES go to CUDA
    large = [e for e in h2d_pageable if e.get("args", {}).get("bytes", 0) >= 65536]
    if large:
        print(f"{len(large)} large pageable copies went to CUDA unchanged, the first at ts "
              f"{min(e['ts'] for e in large)}")
    # every staged call has its DMA from or into pinned memory, issued by pinwheel under the
    # call's correlation id (an H2D's chunks, or a D2H's)
    pinned_ops = {e["args"].get("correlation") for e in ours if e.get("cat") == "gpu_memcpy"
                  and ("(Pinned" in e["name"] or "Pinned)" in e["name"])}
    bare = staged_calls - pinned_ops
    if bare:
        print(f"{len(bare)} staged calls without their pinned DMA, e.g. correlation {min(bare)}")
    ok = (len(staged_calls) >= want and not large and not bare and bool(side)
          and all(e["args"].get("correlation") for e in ours))
ok = ok and dropped == 0 and not missing
print("trace", "ok" if ok else "WRONG")
sys.exit(0 if ok else 1)
