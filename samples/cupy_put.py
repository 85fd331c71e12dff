#!/usr/bin/env python3
"""cp.asarray / cp.asnumpy of numpy arrays (pageable memory): bandwidth, and bytes for many sizes,
dtypes and layouts.

    python3 samples/cupy_put.py [--mib 256] [--reps 7]     one large array, both ways
    python3 samples/cupy_put.py --sizes                    bytes exact for sizes 1 B .. 64 MiB

CuPy stages cp.asarray itself: a buffer from its pinned pool (cudaHostAlloc), filled by a NumPy
assignment (one memmove for a contiguous array), then cudaMemcpyAsync from it.  The bandwidth run
prints the median of --reps of: one cp.asarray + stream synchronize ("asarray"); --burst asarray
calls of distinct arrays back to back, then one synchronize ("asarray burst": the DMA of one
overlaps the fill of the next, as in a loop that feeds batches); cp.asnumpy into a new array.
Bytes are compared.  Exits 1 on any byte that differs, 2 when CuPy is not installed.
"""
import argparse
import statistics
import sys
import time

import numpy as np

try:
    import cupy as cp
except ImportError:
    print("cupy_put: SKIP: cupy is not installed (pip install cupy-cuda13x)")
    sys.exit(2)


def sizes_check():
    rng = np.random.default_rng(1)
    sizes = [1, 7, 4096, 65536 + 3, 1 << 20, (1 << 20) + 5, (17 << 20) + 3, 64 << 20]
    bad = 0
    checked = 0

    def check(what, src, want):
        nonlocal bad, checked
        checked += 1
        back = cp.asnumpy(cp.asarray(src))
        if back.dtype != want.dtype or not np.array_equal(back, want):
            print(f"cupy_put: {what}: bytes differ")
            bad += 1

    for n in sizes:
        for dtype in (np.uint8, np.float32, np.int64):
            count = max(1, n // np.dtype(dtype).itemsize)
            x = rng.integers(0, 255, size=count).astype(dtype)
            name = f"{n} bytes of {np.dtype(dtype).name}"
            check(name, x, x.copy())
            if count > 16:
                # the layouts NumPy copies with its own loops before CuPy's memmove: strided,
                # another dtype, byte-swapped, a 2-D slice of columns
                check("strided " + name, x[1::3], x[1::3].copy())
                check("float64 from " + name, x.astype(np.float64), x.astype(np.float64))
                sw = x.astype(x.dtype.newbyteorder(">"))
                check("byte-swapped " + name, sw, x)
                two = x[: count - count % 4].reshape(4, -1)
                check("column slice of " + name, two[:, 1:], two[:, 1:].copy())
    print(f"cupy_put sizes: {checked} arrays, bytes {'ok' if not bad else 'DIFFER'}")
    return 1 if bad else 0


def bandwidth(mib, reps, burst):
    n = (mib << 20) // 4
    xs = [np.random.default_rng(i).standard_normal(n, dtype=np.float32) for i in range(burst)]
    x = xs[0]
    s = cp.cuda.get_current_stream()
    y = cp.asarray(x)  # first use: context, memory pools
    s.synchronize()
    ok = bool(np.array_equal(cp.asnumpy(y), x))
    one, many, get = [], [], []
    for _ in range(reps):
        del y
        t0 = time.perf_counter()
        y = cp.asarray(x)
        s.synchronize()
        one.append(time.perf_counter() - t0)
    for _ in range(reps):
        t0 = time.perf_counter()
        ys = [cp.asarray(a) for a in xs]
        s.synchronize()
        many.append((time.perf_counter() - t0) / burst)
        ok = ok and all(bool(cp.array_equal(b, cp.asarray(a))) for a, b in zip(xs[:2], ys[:2]))
        del ys
    ok = ok and bool(np.array_equal(cp.asnumpy(y), x))
    for _ in range(reps):
        y = y + 0  # a new device array each time
        s.synchronize()
        t0 = time.perf_counter()
        back = cp.asnumpy(y)
        get.append(time.perf_counter() - t0)
        ok = ok and np.array_equal(back, x)
        del back
    gb = (mib << 20) / 1e9
    print(f"cupy_put: {mib} MiB asarray {gb / statistics.median(one):.1f} GB/s, asarray burst of "
          f"{burst} {gb / statistics.median(many):.1f} GB/s, asnumpy {gb / statistics.median(get):.1f} "
          f"GB/s, bytes {'ok' if ok else 'DIFFER'}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--burst", type=int, default=4)
    ap.add_argument("--sizes", action="store_true")
    a = ap.parse_args()
    sys.exit(sizes_check() if a.sizes else bandwidth(a.mib, a.reps, a.burst))


if __name__ == "__main__":
    main()
