"""What a DataLoader batch in shared memory costs the process that receives it, step by step.

A child process makes --mib MiB batches in shared memory (torch's share_memory_; a DataLoader
worker's collate writes straight into new shared storage) and sends them through a
torch.multiprocessing queue, one at a time: it makes the next only when the receiver has timed
the last, so nothing else runs while the receiver is timed.  For each batch the
receiver times: the first copy out of it into a buffer it has touched before (each source page
faulted in, then copied), a second copy of the same batch (the pages mapped: the copy alone),
and dropping the batch (munmap and, the last reference gone, freeing the shared pages).  With
--populate, every other batch is first mapped with madvise(MADV_POPULATE_READ) and the first
copy timed after it.  --threads sets torch's intra-op threads for the copies.

    python3 bench/shm_probe.py [--mib 147] [--batches 12] [--threads 1] [--populate]
"""
import argparse
import ctypes
import mmap
import statistics
import time

import torch
import torch.multiprocessing as mp

MADV_POPULATE_READ = 22


def producer(q, go, done, n, mib):
    torch.set_num_threads(1)
    for i in range(n):
        go.wait()  # the receiver is done timing the previous batch
        go.clear()
        x = torch.empty(mib * 2**18, dtype=torch.float32)
        x.fill_(float(i))
        x.share_memory_()
        q.put(x)
        del x
    q.put(None)
    done.wait()  # the receiver takes each batch's descriptor from this process: stay until it has


def populate(t):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    a = t.data_ptr() & ~(mmap.PAGESIZE - 1)
    n = t.data_ptr() + t.numel() * t.element_size() - a
    if libc.madvise(a, n, MADV_POPULATE_READ) != 0:
        raise OSError(ctypes.get_errno(), "madvise(MADV_POPULATE_READ)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=147)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--populate", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ctx = mp.get_context("fork")
    q, go, done = ctx.Queue(2), ctx.Event(), ctx.Event()
    p = ctx.Process(target=producer, args=(q, go, done, a.batches, a.mib))
    p.start()
    dst = torch.empty(a.mib * 2**18, dtype=torch.float32)
    dst.fill_(0)
    rows = {"plain": [], "populated": []}
    i = 0
    go.set()
    while (x := q.get()) is not None:
        kind = "populated" if a.populate and i % 2 else "plain"
        t0 = time.perf_counter()
        if kind == "populated":
            populate(x)
        t1 = time.perf_counter()
        dst.copy_(x)
        t2 = time.perf_counter()
        dst.copy_(x)
        t3 = time.perf_counter()
        if dst[-1].item() != float(i):
            raise SystemExit(f"shm_probe: batch {i} read {dst[-1].item()}")
        del x
        t4 = time.perf_counter()
        go.set()
        if i >= 2:  # the first two warm up the allocator and the queue
            rows[kind].append(((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3))
        i += 1
    done.set()
    p.join()
    print(f"shm_probe: {a.mib} MiB batches, {a.threads} copy threads, ms (median of the batches after two):")
    print("| batch | populate | first copy | second copy | drop |")
    print("|---|---|---|---|---|")
    for kind, r in rows.items():
        if r:
            m = [statistics.median(c) for c in zip(*r)]
            print(f"| {kind} ({len(r)}) | {m[0]:.2f} | {m[1]:.2f} | {m[2]:.2f} | {m[3]:.2f} |")


if __name__ == "__main__":
    main()
