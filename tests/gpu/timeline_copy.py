"""The staging pipeline on a timeline: torch.profiler around single large pageable copies
(x.to('cuda') and y.cpu()), run under pinwheel.  Writes the Chrome trace and prints, for each
host-to-device copy, the host time of the call, when the first and the last of its DMA chunks
ran, and how much of the DMA ran while the call was still copying chunks in:

    LD_PRELOAD=build/libpinwheel.so python3 tests/gpu/timeline_copy.py OUT.json.gz [MiB]

A copy costs about max(copy-in, DMA) when the DMAs are spread over the call; it would cost the
sum if each chunk's DMA waited for the whole copy-in.
"""
import gzip
import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

out = sys.argv[1]
mib = int(sys.argv[2]) if len(sys.argv) > 2 else 256
x = torch.randn(mib << 18)  # float32: mib MiB, pageable
g = torch.empty_like(x, device="cuda")
for _ in range(3):  # pinwheel's setup runs in the background: let it finish before the trace
    g.copy_(x)
    torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(3):
        g.copy_(x)
        torch.cuda.synchronize()
    back = g.cpu()
    torch.cuda.synchronize()
assert torch.equal(back, x), "bytes differ"
prof.export_chrome_trace(out)

ev = json.load(gzip.open(out) if out.endswith(".gz") else open(out))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
calls = [e for e in ev if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaMemcpyAsync"]
dmas = [e for e in ev if e.get("cat") == "gpu_memcpy" and "HtoD" in e.get("name", "")]
ok = True
for c in calls:
    t0, t1 = c["ts"], c["ts"] + c["dur"]
    mine = [d for d in dmas if t0 <= d["ts"] <= t1 + 5000]
    if len(mine) < 2:
        continue
    busy = sum(d["dur"] for d in mine)
    under = sum(max(0.0, min(d["ts"] + d["dur"], t1) - d["ts"]) for d in mine)
    first = min(d["ts"] for d in mine) - t0
    last = max(d["ts"] + d["dur"] for d in mine) - t1
    print(f"H2D {mib} MiB: call {c['dur'] / 1e3:.2f} ms; {len(mine)} DMA chunks, {busy / 1e3:.2f} ms of DMA; "
          f"first DMA {first / 1e3:.3f} ms after the call began; {100 * under / busy:.0f} % of the DMA ran "
          f"during the call; last DMA ended {last / 1e3:.3f} ms after it returned; "
          f"call + DMA would be {(c['dur'] + busy) / 1e3:.2f} ms, copy done after {(c['dur'] + last) / 1e3:.2f} ms")
    ok = ok and under / busy > 0.5
print("timeline:", "overlapped" if ok else "NOT overlapped", "- trace", out)
sys.exit(0 if ok else 1)
