"""Training from a DataLoader: batches made on the CPU by worker processes, as image pipelines do.

A synthetic data set: __getitem__ takes a uint8 HWC image (224 x 224 x 3; a random one made once,
rolled by the index, so every sample is deterministic and cheap) and converts it as ToTensor and
Normalize do, to float32 CHW on the CPU.  A DataLoader with --workers worker processes collates
batches of --batch (256: 147 MiB of float32), which reach the main process in shared memory.
ResNet-18 or ResNet-50 (torchvision, random weights), bf16 autocast, SGD lr 0.01 momentum 0.9.

    --mode naive    DataLoader(pin_memory=False), x.to('cuda'): pageable, blocking (what pinwheel
                    stages, with no code change:  pinwheel run -- python samples/train_loader.py)
    --mode pinned   DataLoader(pin_memory=True), x.to('cuda', non_blocking=True): the hand-written
                    path
    --mode loader   the DataLoader alone, no GPU work: the rate its workers deliver batches at
    --mode gpu      no DataLoader: one batch made once, already on the GPU (the limit)

--breakdown also prints where the main thread's time went per timed step: waiting for the next
batch, the copies to the GPU, launching the step, dropping the CPU batch (its shared memory).

Prints "... ms/iter, ... images/s, final loss L" (the timed steps after --warmup untimed ones).
"""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

import train_common as tc

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class Synthetic(Dataset):
    def __init__(self, n, size):
        self.n = n
        self.img = torch.randint(0, 256, (size, size, 3), dtype=torch.uint8,
                                 generator=torch.Generator().manual_seed(0))
        # Normalize as one multiply-add per element: (x / 255 - mean) / std
        self.scale = torch.tensor([1 / (255 * s) for s in STD]).view(3, 1, 1)
        self.shift = torch.tensor([-m / s for m, s in zip(MEAN, STD)]).view(3, 1, 1)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        hwc = self.img.roll(shifts=(i % 211, (7 * i) % 223), dims=(0, 1))  # uint8, HWC
        x = hwc.permute(2, 0, 1).to(torch.float32, memory_format=torch.contiguous_format)  # ToTensor
        x.mul_(self.scale).add_(self.shift)  # Normalize
        return x, i % 1000


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["resnet18", "resnet50"], default="resnet50")
    p.add_argument("--mode", choices=["naive", "pinned", "loader", "gpu"], default="naive")
    p.add_argument("--workers", type=int, default=10)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--iters", type=int, default=30, help="timed steps")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--breakdown", action="store_true", help="print the main thread's time per phase")
    args = p.parse_args()

    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    steps = args.warmup + args.iters
    data = Synthetic(steps * args.batch, args.size)
    if args.mode != "loader":
        import torchvision
        model = getattr(torchvision.models, args.model)(weights=None).cuda()
        fmt = torch.channels_last if args.channels_last else torch.contiguous_format
        model = model.to(memory_format=fmt)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    pinned = args.mode == "pinned"
    if args.mode == "gpu":
        samples = [data[i] for i in range(args.batch)]
        xg = torch.stack([x for x, _ in samples]).cuda().contiguous(memory_format=fmt)
        yg = torch.tensor([y for _, y in samples]).cuda()
        batches = ((xg, yg) for _ in range(steps))
    else:
        batches = iter(DataLoader(data, batch_size=args.batch, shuffle=False, drop_last=True,
                                  num_workers=args.workers, persistent_workers=args.workers > 0,
                                  pin_memory=pinned))
    t0 = None
    loss = None
    timed = 0  # steps after the warm-up
    tw = tc_ = ts = tf = 0.0  # the main thread's time: waiting, copying, launching, freeing
    clock = time.perf_counter
    for i in range(steps):
        if i == args.warmup:
            if args.mode != "loader":
                torch.cuda.synchronize()
            t0 = clock()
            tw = tc_ = ts = tf = 0.0
        a = clock()
        try:
            xc, yc = next(batches)
        except StopIteration:
            break
        b = clock()
        timed += i >= args.warmup
        if args.mode == "loader":
            del xc, yc
            tw, tf = tw + b - a, tf + clock() - b
            continue
        torch.cuda.nvtx.range_push(f"train_step#{i}")
        x = xc.to("cuda", non_blocking=pinned).contiguous(memory_format=fmt)
        y = yc.to("cuda", non_blocking=pinned)
        c = clock()
        loss = tc.step(model, opt, x, y)
        torch.cuda.nvtx.range_pop()
        d = clock()
        del xc, yc
        tw, tc_, ts, tf = tw + b - a, tc_ + c - b, ts + d - c, tf + clock() - d
    if args.mode != "loader":
        torch.cuda.synchronize()
    if t0 is None or not timed:
        raise SystemExit("train_loader: fewer batches than --warmup")
    ms = (clock() - t0) * 1e3 / timed
    final = "" if loss is None else f", final loss {loss.float().item():.4f}"
    source = "no DataLoader" if args.mode == "gpu" else f"{args.workers} workers"
    print(f"train_loader({args.model}, {args.mode}, {source}): batch {args.batch}: "
          f"{ms:.2f} ms/iter, {args.batch * 1e3 / ms:.1f} images/s{final}", flush=True)
    if args.breakdown:
        n = timed / 1e3
        print(f"train_loader: main thread ms/step: waiting for the batch {tw / n:.2f}, copies {tc_ / n:.2f}, "
              f"launching the step {ts / n:.2f}, dropping the CPU batch {tf / n:.2f}", flush=True)


if __name__ == "__main__":
    main()
