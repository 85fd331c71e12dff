"""Checks observe-mode summaries (JSON) of GPU runs.
   check_observe.py naive_copy SUMMARY ITERS MIB
   check_observe.py naive_copy_static SUMMARY ITERS MIB   (built with the static CUDA runtime)
   check_observe.py torch SUMMARY_N SUMMARY_2N N MIB
"""
import json
import sys


def rows(s):
    return {(r["direction"], r["src"], r["dst"]): r for r in s["copies"]}


def get(s, key):
    r = rows(s).get(key)
    return (r["calls"], r["bytes"]) if r else (0, 0)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def calls_of(s, prefix):
    return {k: v["calls"] for k, v in s["calls"].items() if k.startswith(prefix) and v["calls"]}


kind = sys.argv[1]
if kind == "naive_copy_static":  # only the driver front end can see it: driver hooks, no runtime
    s = json.load(open(sys.argv[2]))
    iters, mib = int(sys.argv[3]), int(sys.argv[4])
    calls, nbytes = get(s, ("H2D", "pageable", "device"))
    if calls != iters or nbytes != iters * (mib << 20):
        fail(f"pageable H2D: {calls} calls / {nbytes} bytes, expected {iters} / {iters * (mib << 20)}")
    if calls_of(s, "cuda") or calls_of(s, "__cuda"):
        fail(f"runtime hooks counted in a static-runtime program: {calls_of(s, 'cuda')}")
    launches = sum(v for k, v in calls_of(s, "cuLaunch").items())
    if launches < iters:
        fail(f"{launches} driver launches, expected at least {iters}")
    print(f"naive_copy_static observe: {calls} pageable H2D copies, {nbytes} bytes; driver calls",
          calls_of(s, "cu"))
elif kind == "naive_copy":
    s = json.load(open(sys.argv[2]))
    iters, mib = int(sys.argv[3]), int(sys.argv[4])
    calls, nbytes = get(s, ("H2D", "pageable", "device"))
    if calls != iters or nbytes != iters * (mib << 20):
        fail(f"pageable H2D: {calls} calls / {nbytes} bytes, expected {iters} / {iters * (mib << 20)}")
    launches = s["calls"]["__cudaLaunchKernel"]["calls"]
    if launches < iters:
        fail(f"{launches} __cudaLaunchKernel launches, expected at least {iters}")
    print(f"naive_copy observe: {calls} pageable H2D copies, {nbytes} bytes, {launches} launches: ok")
else:
    a, b = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
    n, mib = int(sys.argv[4]), int(sys.argv[5])
    for src in ("pageable", "pinned"):
        ca, ba = get(a, ("H2D", src, "device"))
        cb, bb = get(b, ("H2D", src, "device"))
        if cb - ca != n or bb - ba != n * (mib << 20):
            fail(f"{src} H2D: {cb - ca} more calls / {bb - ba} more bytes with {n} more copies")
    # every copy counted once: by the runtime front end, never again by the driver's
    if calls_of(a, "cuMemcpy") or calls_of(b, "cuMemcpy"):
        fail(f"driver copies counted in a PyTorch run: {calls_of(a, 'cuMemcpy')}")
    la = sum(v["calls"] for k, v in a["calls"].items() if "aunchKernel" in k)
    if a["calls"]["__cudaLaunchKernel"]["calls"] == 0 and la == 0:
        fail("no kernel launch seen")
    print("torch observe: pageable and pinned H2D copies counted exactly; launches",
          {k: v["calls"] for k, v in a["calls"].items() if "aunchKernel" in k and v["calls"]})
