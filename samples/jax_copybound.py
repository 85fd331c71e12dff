#!/usr/bin/env python3
"""A copy-bound JAX training loop fed with numpy batches: each step moves a float32 batch from a
numpy array (pageable memory) to the GPU with jax.device_put and runs a jitted SGD step of a small
MLP on it.  What a JAX input pipeline without prefetching to the device does.

    python3 samples/jax_copybound.py [--iters 20] [--batch-mib 256] [--data host|device] [--check]

--data device: the batches are on the GPU before the loop (the limit).  --check: the bytes of
every batch that reached the device are compared with the host's.  Prints ms/iter.
"""
import argparse
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

D, H = 1024, 256


@jax.jit
def step(params, x):
    def loss(p):
        h = jax.nn.relu(x @ p[0])
        return jnp.mean((h @ p[1]) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return tuple(p - 1e-3 * g for p, g in zip(params, grads)), value


@jax.jit
def checksum(x):  # a sum of the words mod 2^32 (JAX without x64 has no uint64)
    return jnp.sum(jax.lax.bitcast_convert_type(x, jnp.uint32) % 65521, dtype=jnp.uint32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch-mib", type=int, default=256)
    ap.add_argument("--data", choices=["host", "device"], default="host")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    rows = (a.batch_mib << 20) // (4 * D)
    rng = np.random.default_rng(0)
    nb = 3
    host = [rng.standard_normal((rows, D), dtype=np.float32) for _ in range(nb)]
    want = [int(np.sum(h.view(np.uint32) % 65521, dtype=np.uint32)) for h in host] if a.check else None
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    params = (jax.random.normal(k1, (D, H)) * 0.02, jax.random.normal(k2, (H, 1)) * 0.02)
    on_device = [jax.device_put(h) for h in host] if a.data == "device" else None
    bad = 0
    t0 = None
    for i in range(-a.warmup, a.iters):
        if i == 0:
            jax.block_until_ready(params)
            t0 = time.perf_counter()
        b = i % nb
        x = on_device[b] if on_device else jax.device_put(host[b])
        params, value = step(params, x)
        if a.check and int(checksum(x)) != want[b]:
            bad += 1
    jax.block_until_ready(params)
    ms = (time.perf_counter() - t0) * 1e3 / a.iters
    print(f"jax_copybound: {rows}x{D} float32 batch ({a.batch_mib} MiB), data on {a.data}, "
          f"{a.iters} iters: {ms:.2f} ms/iter, loss {float(value):.5f}"
          + (f", batches {'ok' if not bad else 'DIFFER'}" if a.check else ""))
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
