#!/usr/bin/env python3
"""numba.cuda.to_device / copy_to_host of numpy arrays (pageable memory): bandwidth, and bytes for
many sizes.  numba reaches CUDA through the driver API (cuMemcpyHtoD, cuMemcpyDtoH), which the
driver front end stages.

    python3 samples/numba_put.py [--mib 256] [--reps 7]     one large array, both ways
    python3 samples/numba_put.py --sizes                    bytes exact for sizes 1 B .. 64 MiB

The bandwidth run prints the median of --reps of cuda.to_device (synchronous) and of
copy_to_host into a new array, with the bytes compared.  Exits 1 on any byte that differs, 2 when
numba or its CUDA target is missing.
"""
import argparse
import statistics
import sys
import time

import numpy as np

try:
    from numba import cuda
except ImportError:
    print("numba_put: SKIP: numba is not installed (pip install numba numba-cuda)")
    sys.exit(2)
if not cuda.is_available():
    print("numba_put: SKIP: numba sees no CUDA device")
    sys.exit(2)


def sizes_check():
    rng = np.random.default_rng(1)
    sizes = [1, 7, 4096, 65536 + 3, 1 << 20, (1 << 20) + 5, (17 << 20) + 3, 64 << 20]
    bad = 0
    for n in sizes:
        for dtype in (np.uint8, np.float32, np.int64):
            count = max(1, n // np.dtype(dtype).itemsize)
            x = rng.integers(0, 255, size=count).astype(dtype)
            want = x.copy()
            d = cuda.to_device(x)
            x[:] = 0  # to_device returned: the source is the program's again
            if not np.array_equal(d.copy_to_host(), want):
                print(f"numba_put: {n} bytes of {np.dtype(dtype).name}: bytes differ")
                bad += 1
    print(f"numba_put sizes: {len(sizes) * 3} arrays, bytes {'ok' if not bad else 'DIFFER'}")
    return 1 if bad else 0


def bandwidth(mib, reps):
    n = (mib << 20) // 4
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    d = cuda.to_device(x)  # first use: context
    cuda.synchronize()
    put, get = [], []
    for _ in range(reps):
        del d
        t0 = time.perf_counter()
        d = cuda.to_device(x)
        cuda.synchronize()
        put.append(time.perf_counter() - t0)
    ok = bool(np.array_equal(d.copy_to_host(), x))
    for _ in range(reps):
        t0 = time.perf_counter()
        back = d.copy_to_host()
        get.append(time.perf_counter() - t0)
        ok = ok and np.array_equal(back, x)
        del back
    gb = (mib << 20) / 1e9
    print(f"numba_put: {mib} MiB to_device {gb / statistics.median(put):.1f} GB/s, copy_to_host "
          f"{gb / statistics.median(get):.1f} GB/s, bytes {'ok' if ok else 'DIFFER'}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--sizes", action="store_true")
    a = ap.parse_args()
    sys.exit(sizes_check() if a.sizes else bandwidth(a.mib, a.reps))


if __name__ == "__main__":
    main()
