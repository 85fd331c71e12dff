"""The staging pipeline on a timeline: torch.profiler around single large pageable copies
(x.to('cuda') and y.cpu()), run under pinwheel.  Writes the Chrome trace and prints, for each
host-to-device copy, the host time of the call, when the first and the last of its DMA chunks
ran, and how much of the DMA ran while the call was still copying chunks in:

    LD_PRELOAD=build/libpinwheel.so python3 tests/gpu/timeline_copy.py OUT.json.gz [MiB]
    python3 tests/gpu/timeline_copy.py TRACE.json.gz --analyze        (no GPU needed)

A copy costs about max(copy-in, DMA) when the DMAs are spread over the copy-in; it would cost the
sum if each chunk's DMA waited for the whole copy-in.  The check: the first DMA begins before half
of the time from the call to the end of the last DMA.
"""
import gzip
import json
import sys


def analyze(path):
    """(lines, ok): per staged host-to-device copy, how its DMA chunks sit against its copy-in.

    The program's call is the `aten::copy_` CPU op; under pinwheel the runtime calls in the trace
    are the engine's own (one cudaMemcpyAsync per DMA chunk), and the copy-in ends where the
    cudaStreamSynchronize that x.to()/copy_ makes begins."""
    ev = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e.get("name") == "aten::copy_"]
    syncs = [e for e in ev if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaStreamSynchronize"]
    dmas = [e for e in ev if e.get("cat") == "gpu_memcpy" and "HtoD" in e.get("name", "")]
    lines, ok, seen = [], True, 0
    for c in ops:
        t0, end = c["ts"], c["ts"] + c["dur"]
        mine = [d for d in dmas if t0 <= d["ts"] <= end]
        if len(mine) < 2:
            continue
        seen += 1
        inner = [s for s in syncs if t0 <= s["ts"] <= end]
        t1 = min(s["ts"] for s in inner) if inner else end  # the copy-in (staging) ends here
        busy = sum(d["dur"] for d in mine)
        under = sum(max(0.0, min(d["ts"] + d["dur"], t1) - d["ts"]) for d in mine)
        first = min(d["ts"] for d in mine) - t0
        last = max(d["ts"] + d["dur"] for d in mine) - t1
        lines.append(f"H2D: copy-in {(t1 - t0) / 1e3:.2f} ms; {len(mine)} DMA chunks, {busy / 1e3:.2f} ms of DMA; "
                     f"first DMA began {first / 1e3:.3f} ms after the call; {100 * under / busy:.0f} % of the "
                     f"DMA ran during the copy-in; the last ended {last / 1e3:.3f} ms after it; "
                     f"done {(t1 - t0 + last) / 1e3:.2f} ms after the call began (copy-in + DMA: "
                     f"{(t1 - t0 + busy) / 1e3:.2f} ms)")
        # pipelined: the first chunk's DMA begins before half the copy's time (call to last DMA)
        # has passed; a copy whose DMAs each waited for the whole copy-in starts them later.  A
        # deferred copy's copy-in runs after the call returns, on pinwheel's thread, so the
        # share of the DMA inside the call says nothing about it.
        ok = ok and first < 0.5 * (t1 - t0 + last)
    return lines, ok and seen > 0


def record(out, mib):
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(mib << 18)  # float32: mib MiB, pageable
    g = torch.empty_like(x, device="cuda")
    for _ in range(3):  # the first copy sets pinwheel's pool up (about 30 ms): not in the trace
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



if __name__ == "__main__":
    out = sys.argv[1]
    if not (len(sys.argv) > 2 and sys.argv[2] == "--analyze"):  # else: an existing trace
        record(out, int(sys.argv[2]) if len(sys.argv) > 2 else 256)
    lines, ok = analyze(out)
    print("\n".join(lines))
    print("timeline:", "overlapped" if ok else "NOT overlapped", "- trace", out)
    sys.exit(0 if ok else 1)
