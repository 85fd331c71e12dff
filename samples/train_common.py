"""Shared by train_naive.py and train_prefetch.py: the model, the data, the timed loop; step() by
train_copybound.py too.

ResNet-50 (torchvision, random weights: nothing is downloaded), bf16 autocast, channels_last, SGD
with momentum.  The data set is a few batches made once on the CPU; each step takes the next one.
"""
import argparse
import time

import torch
import torch.nn.functional as F

import profiling


def parse_args(doc):
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--iters", type=int, default=30, help="timed steps")
    p.add_argument("--warmup", type=int, default=8, help="untimed steps first")
    p.add_argument("--nbatches", type=int, default=4, help="distinct batches, used in turn")
    p.add_argument("--size", type=int, default=224, help="image side")
    p.add_argument("--deterministic", action="store_true",
                   help="deterministic algorithms, fixed seed, print every loss (for bit-identity)")
    p.add_argument("--data", choices=["pageable", "gpu"], default="pageable",
                   help="train_naive only: gpu = data already resident (the limit)")
    p.add_argument("--sync-each-step", action="store_true",
                   help="torch.cuda.synchronize() after fetching each batch: the host sync a "
                        "blocking .to('cuda') makes, without its copy")
    profiling.add_args(p)
    return p.parse_args()


def setup(args):
    torch.manual_seed(0)
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
    else:
        torch.backends.cudnn.benchmark = True
    import torchvision  # here: train_copybound.py takes step() without it
    model = torchvision.models.resnet50(weights=None).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    xs, ys = [], []
    for _ in range(args.nbatches):
        x = torch.randn(args.batch, 3, args.size, args.size, generator=g).to(torch.bfloat16)
        xs.append(x.contiguous(memory_format=torch.channels_last))  # pageable CPU memory
        ys.append(torch.randint(0, 1000, (args.batch,), generator=g))
    return model, opt, xs, ys


def step(model, opt, x, y):
    """One step on a batch already on the GPU: bf16 autocast forward, backward, SGD; the loss."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def run(args, name, get_batch):
    """get_batch(i) -> (x, y) on the GPU.  Prints ms/iter and images/s (and losses if asked)."""
    model, opt, xs, ys = setup(args)
    losses = []
    t0 = None
    prof = profiling.start(args, args.warmup)
    for i in range(args.warmup + args.iters):
        if i == args.warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        torch.cuda.nvtx.range_push(f"train_step#{i}")  # steps of a trace without the profiler
        x, y = get_batch(i, xs, ys)
        if args.sync_each_step:
            torch.cuda.synchronize()
        loss = step(model, opt, x, y)
        if args.deterministic:
            losses.append(loss.detach())
        torch.cuda.nvtx.range_pop()
        prof.step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / args.iters
    prof.stop()
    if args.deterministic:
        print("losses " + " ".join(float(l.float().item()).hex() for l in losses))
    print(f"{name}: batch {args.batch}: {ms:.2f} ms/iter, {args.batch * 1e3 / ms:.1f} images/s",
          flush=True)
