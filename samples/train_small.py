"""A small-compute training loop, bound by launches and host round trips: a narrow MLP on a small
batch copied from pageable memory each step, and the loss read back with .item() every step (what
a logging line does).  Each step is a few hundred short kernels; the copies are small.

    --mode naive     pageable batches, blocking x.to('cuda'), loss.item() each step
    --mode resident  the batches already on the GPU (the limit)

Prints ms/step; the last batch on the GPU is compared byte for byte with its CPU source.
"""
import argparse
import time

import torch
import torch.nn.functional as F

import profiling


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["naive", "resident"], default="naive")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--features", type=int, default=1024)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--nbatches", type=int, default=4)
    profiling.add_args(p, default_steps=10)
    a = p.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(a.batch, a.features, generator=g) for _ in range(a.nbatches)]
    ys = [torch.randint(0, 10, (a.batch,), generator=g) for _ in range(a.nbatches)]
    layers = [torch.nn.Linear(a.features, a.width), torch.nn.ReLU()]
    for _ in range(a.layers - 2):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.LayerNorm(a.width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(a.width, 10))
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # foreach: a few kernels per step
    if a.mode == "resident":
        gx = [x.cuda() for x in xs]
        gy = [y.cuda() for y in ys]
        get = lambda i: (gx[i % a.nbatches], gy[i % a.nbatches])
    else:
        get = lambda i: (xs[i % a.nbatches].to("cuda"), ys[i % a.nbatches].to("cuda"))
    prof = profiling.start(a, a.warmup)
    total = 0.0
    for i in range(a.warmup + a.iters):
        if i == a.warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        x, y = get(i)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += loss.item()  # the host waits for the step every step
        last = (i, x)
        prof.step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / a.iters
    prof.stop()
    i, x = last
    ok = torch.equal(x.cpu(), xs[i % a.nbatches])
    print(f"train_small {a.mode}: batch {a.batch}: {ms:.3f} ms/step, mean loss "
          f"{total / (a.warmup + a.iters):.4f}, bytes {'ok' if ok else 'DIFFER'}", flush=True)
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
