#!/usr/bin/env python3
"""PyTorch's own pinned paths: tensor.pin_memory() of a large CPU tensor, and a DataLoader with
pin_memory=True (its pin thread), with bytes compared.

    python3 samples/torch_pin.py [--mib 256] [--reps 7]

pin_memory() takes a block from PyTorch's caching host allocator (cudaHostAlloc the first time)
and copies the tensor into it with PyTorch's own vectorised loop (no memcpy or memmove of 1 MiB or
more, read with a counting preload).  Under pinwheel that memory is recorded as the program's
pinned memory and the copy stays PyTorch's, so this measures that nothing got slower.  Prints the median of --reps of
pin_memory() then .to('cuda', non_blocking=True) + synchronize, and of the pin_memory() alone, and
the DataLoader's batches per second.  Exits 1 on any byte that differs.
"""
import argparse
import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Batches(Dataset):
    def __init__(self, tensors):
        self.t = tensors

    def __len__(self):
        return len(self.t)

    def __getitem__(self, i):
        return self.t[i]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    n = (a.mib << 20) // 4
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, generator=g)
    p = x.pin_memory()  # first use: context, the host allocator's first block
    d = p.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    ok = torch.equal(p, x) and torch.equal(d.cpu(), x)
    pin, both = [], []
    for _ in range(a.reps):
        del p, d
        t0 = time.perf_counter()
        p = x.pin_memory()
        t1 = time.perf_counter()
        d = p.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        pin.append(t1 - t0)
        both.append(t2 - t0)
    ok = ok and torch.equal(p, x) and torch.equal(d.cpu(), x)
    # the DataLoader's pin thread: whole 64 MiB batches, pinned there, moved in the main thread
    items = [torch.randn(4, (64 << 20) // 4 // 4, generator=g) for _ in range(8)]
    dl = DataLoader(Batches(items), batch_size=None, pin_memory=True, num_workers=0)
    for i, b in enumerate(dl):  # first pass: the pin thread's blocks; bytes compared
        ok = ok and b.is_pinned() and torch.equal(b.to("cuda", non_blocking=True).cpu(), items[i])
    t0 = time.perf_counter()
    for b in dl:
        d = b.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    loader = len(items) / (time.perf_counter() - t0)
    gb = (a.mib << 20) / 1e9
    print(f"torch_pin: {a.mib} MiB pin_memory {gb / statistics.median(pin):.1f} GB/s, pin_memory + "
          f"to(cuda) {gb / statistics.median(both):.1f} GB/s, DataLoader pin_memory {loader:.1f} "
          f"batches/s, bytes {'ok' if ok else 'DIFFER'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
