#!/usr/bin/env python3
"""jax.device_put of numpy arrays (pageable memory): bandwidth, and bytes for many sizes.

    python3 samples/jax_put.py [--mib 256] [--reps 7]     one large array, both ways
    python3 samples/jax_put.py --sizes                    bytes exact for sizes 1 B .. 64 MiB

The bandwidth run prints the median of --reps of: device_put + block_until_ready (host-blocking
until the array is on the device; the puts back to back), then of np.asarray of a new device array
(device to a fresh host array), with the bytes compared.  Exits 1 on any byte that differs.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax  # noqa: E402
import numpy as np  # noqa: E402


def sizes_check():
    rng = np.random.default_rng(1)
    sizes = [1, 7, 4096, 65536 + 3, 1 << 20, (1 << 20) + 5, (17 << 20) + 3, 64 << 20]
    bad = 0
    for n in sizes:
        for dtype in (np.uint8, np.float32, np.int64):
            count = max(1, n // np.dtype(dtype).itemsize)
            x = rng.integers(0, 255, size=count).astype(dtype)
            y = jax.device_put(x)
            x_copy = x.copy()
            # JAX may still read x after device_put returned (its H2D runs on a worker thread), so
            # the buffer is reused only once the array is ready, with or without pinwheel
            y.block_until_ready()
            x[:] = 0
            back = np.asarray(y)
            if not np.array_equal(back, x_copy):
                print(f"jax_put: {n} bytes of {np.dtype(dtype).name}: bytes differ")
                bad += 1
            # a slice of a device array back, and a strided numpy source
            if count > 16:
                s = x_copy[1::3]
                if not np.array_equal(np.asarray(jax.device_put(s)), s):
                    print(f"jax_put: strided {n} bytes of {np.dtype(dtype).name}: bytes differ")
                    bad += 1
    print(f"jax_put sizes: {len(sizes) * 3} arrays, bytes {'ok' if not bad else 'DIFFER'}")
    return 1 if bad else 0


def bandwidth(mib, reps):
    n = (mib << 20) // 4
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    y = jax.device_put(x).block_until_ready()  # first use: contexts, pools
    # The puts run back to back, then the gets: a put timed right after np.asarray of a 256 MiB
    # array takes about 8 ms longer, with or without pinwheel (JAX is still releasing the host
    # array it made; docs/RESULTS.md), which would be the get's cost, not the put's.
    put, get = [], []
    for _ in range(reps):
        del y
        t0 = time.perf_counter()
        y = jax.device_put(x)
        y.block_until_ready()
        put.append(time.perf_counter() - t0)
    ok = bool(np.array_equal(np.asarray(y), x))
    plus0 = jax.jit(lambda a: a + 0)
    for _ in range(reps):
        y = plus0(y).block_until_ready()  # a new device array each time (JAX caches np.asarray's)
        t0 = time.perf_counter()
        back = np.asarray(y)
        get.append(time.perf_counter() - t0)
        ok = ok and np.array_equal(back, x)
        del back
    gb = (mib << 20) / 1e9
    print(f"jax_put: {mib} MiB device_put {gb / statistics.median(put):.1f} GB/s (host-blocking until "
          f"ready), device_get {gb / statistics.median(get):.1f} GB/s, bytes {'ok' if ok else 'DIFFER'}")
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
