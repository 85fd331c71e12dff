"""The training loop on several GPUs of one machine: DistributedDataParallel, one process per GPU,
each rank's batches in pageable CPU memory with a blocking x.to('cuda') every step (--mode naive),
or pinned and copied one step ahead on a side stream (--mode prefetch: the hand-written
prefetcher of train_prefetch.py, per rank).  --loader-workers N takes each rank's batches from a
DataLoader with N forked workers instead (pageable, in shared memory).

After the timed steps every rank hashes its parameters; rank 0 prints one line with the slowest
rank's time and whether the ranks' parameters agree (they must: DDP averages the gradients), and
the process exits 1 when they do not.

    python3 -m torch.distributed.run --nproc-per-node 2 samples/train_ddp.py
    pinwheel run --trace rank%r.json.gz -- python3 -m torch.distributed.run --nproc-per-node 2 \\
        samples/train_ddp.py                                   # a trace per rank
"""
import argparse
import hashlib
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset


class Batches(Dataset):
    """The rank's fixed batches, one item each (the DataLoader adds no batching)."""

    def __init__(self, xs, ys, n):
        self.xs, self.ys, self.n = xs, ys, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        k = i % len(self.xs)
        return self.xs[k].clone(), self.ys[k].clone()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet50", help="a torchvision model name")
    p.add_argument("--batch", type=int, default=128, help="per rank")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--nbatches", type=int, default=4)
    p.add_argument("--mode", choices=["naive", "prefetch"], default="naive")
    p.add_argument("--loader-workers", type=int, default=0,
                   help="batches from a DataLoader with this many forked workers (naive mode)")
    a = p.parse_args()
    if a.loader_workers and a.mode != "naive":
        p.error("--loader-workers goes with --mode naive")
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, a.model)(weights=None).cuda().to(memory_format=torch.channels_last)
    ddp = DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1 + dist.get_rank())
    xs = [torch.randn(a.batch, 3, 224, 224, generator=g).to(torch.bfloat16)
          .contiguous(memory_format=torch.channels_last) for _ in range(a.nbatches)]
    ys = [torch.randint(0, 1000, (a.batch,), generator=g) for _ in range(a.nbatches)]
    steps = a.warmup + a.iters

    if a.mode == "prefetch":
        from train_prefetch import Prefetcher
        pf = Prefetcher(xs, ys)
        batches = (pf.get(i) for i in range(steps))
    elif a.loader_workers:
        dl = DataLoader(Batches(xs, ys, steps), batch_size=None, num_workers=a.loader_workers,
                        multiprocessing_context="fork")
        batches = ((x.to("cuda"), y.to("cuda")) for x, y in dl)
    else:
        batches = ((xs[i % a.nbatches].to("cuda"), ys[i % a.nbatches].to("cuda")) for i in range(steps))

    t0 = None
    for i, (x, y) in enumerate(batches):
        if i == a.warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / a.iters
    print(f"train_ddp: rank {dist.get_rank()} of {world}, {a.model}, batch {a.batch} "
          f"per rank: {ms:.2f} ms/iter, loss {loss.item():.4f}", flush=True)

    h = hashlib.sha256()  # the parameters only: each rank's BatchNorm statistics are its own
    for t in model.parameters():
        h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    got = [None] * world
    dist.all_gather_object(got, (ms, h.hexdigest()))
    agree = all(d == got[0][1] for _, d in got)
    if dist.get_rank() == 0:
        print(f"train_ddp {a.mode}{f', {a.loader_workers} loader workers' if a.loader_workers else ''}: "
              f"{world} ranks, slowest rank {max(m for m, _ in got):.2f} ms/iter, "
              f"params {'agree' if agree else 'DIFFER'}", flush=True)
    dist.destroy_process_group()
    if not agree:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
