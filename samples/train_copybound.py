"""A copy-bound training loop: a large float32 batch per step (256 MiB by default) and a small MLP
(a few ms of compute), so the host-to-device copy dominates the step.

    --mode naive     pageable CPU batches, blocking x.to('cuda')   (run it under pinwheel too)
    --mode prefetch  hand-written: pre-pinned batches, a side stream, non_blocking copies of the
                     next batch while this one computes, wait_stream / record_stream
    --mode waited    pre-pinned batches, each copied on a side stream when the step asks for it,
                     its DMA waited for (it overlaps the previous step's GPU work, nothing else):
                     an optimistic bound of any staging tool while the program waits for each
                     copy (x.to('cuda') waits for its whole stream, which is more)
    --mode resident  the batches already on the GPU (the limit)

Prints ms/step; the last batch on the GPU is compared byte for byte with its CPU source.
"""
import argparse
import time

import torch

import profiling
from train_common import step as train_step


def setup(mib=256, features=4096, hidden=2048, nbatches=3):
    """The seeded batches (pageable CPU tensors of mib MiB), the MLP on the GPU and its optimizer."""
    torch.manual_seed(0)
    rows = (mib << 20) // (4 * features)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(rows, features, generator=g) for _ in range(nbatches)]
    ys = [torch.randint(0, 10, (rows,), generator=g) for _ in range(nbatches)]
    model = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.GELU(),
                                torch.nn.Linear(hidden, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    return xs, ys, model, opt


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["naive", "prefetch", "waited", "resident"], default="naive")
    p.add_argument("--mib", type=int, default=256, help="batch size in MiB (float32)")
    p.add_argument("--features", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--nbatches", type=int, default=3)
    profiling.add_args(p)
    a = p.parse_args()
    xs, ys, model, opt = setup(a.mib, a.features, a.hidden, a.nbatches)

    if a.mode == "resident":
        gx = [x.cuda() for x in xs]
        gy = [y.cuda() for y in ys]
        get = lambda i: (gx[i % a.nbatches], gy[i % a.nbatches])
    elif a.mode == "naive":
        get = lambda i: (xs[i % a.nbatches].to("cuda"), ys[i % a.nbatches].to("cuda"))
    elif a.mode == "waited":
        px = [x.pin_memory() for x in xs]
        py = [y.pin_memory() for y in ys]
        side = torch.cuda.Stream()

        def get(i):
            with torch.cuda.stream(side):  # the DMA overlaps the previous step's GPU work ...
                x = px[i % a.nbatches].to("cuda", non_blocking=True)
                y = py[i % a.nbatches].to("cuda", non_blocking=True)
            cur = torch.cuda.current_stream()
            cur.wait_stream(side)
            x.record_stream(cur)
            y.record_stream(cur)
            side.synchronize()  # ... and the step waits for the DMA (x.to('cuda') waits for more)
            return x, y
    else:
        px = [x.pin_memory() for x in xs]
        py = [y.pin_memory() for y in ys]
        side = torch.cuda.Stream()
        nxt = {}

        def load(i):
            with torch.cuda.stream(side):
                nxt[i] = (px[i % a.nbatches].to("cuda", non_blocking=True),
                          py[i % a.nbatches].to("cuda", non_blocking=True))

        def get(i):
            if i not in nxt:
                load(i)
            cur = torch.cuda.current_stream()
            cur.wait_stream(side)
            x, y = nxt.pop(i)
            x.record_stream(cur)
            y.record_stream(cur)
            load(i + 1)
            return x, y

    last = None
    prof = profiling.start(a, a.warmup)
    for i in range(a.warmup + a.iters):
        if i == a.warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        x, y = get(i)
        loss = train_step(model, opt, x, y)
        last = (i, x)
        prof.step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / a.iters
    prof.stop()
    i, x = last
    ok = torch.equal(x.cpu(), xs[i % a.nbatches])
    print(f"train_copybound {a.mode}: {a.mib} MiB batch: {ms:.2f} ms/step, loss {loss.item():.4f}, "
          f"bytes {'ok' if ok else 'DIFFER'}", flush=True)
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
