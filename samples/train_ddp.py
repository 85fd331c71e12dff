"""The naive training loop on several GPUs of one machine: DistributedDataParallel, one process per
GPU, each rank's batches in pageable CPU memory with a blocking x.to('cuda') every step.

    python3 -m torch.distributed.run --nproc-per-node 2 samples/train_ddp.py
    pinwheel run --trace rank%r.json.gz -- python3 -m torch.distributed.run --nproc-per-node 2 \\
        samples/train_ddp.py                                   # a trace per rank
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet50", help="a torchvision model name")
    p.add_argument("--batch", type=int, default=128, help="per rank")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--nbatches", type=int, default=4)
    a = p.parse_args()
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, a.model)(weights=None).cuda().to(memory_format=torch.channels_last)
    ddp = DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1 + dist.get_rank())
    xs = [torch.randn(a.batch, 3, 224, 224, generator=g).to(torch.bfloat16)
          .contiguous(memory_format=torch.channels_last) for _ in range(a.nbatches)]
    ys = [torch.randint(0, 1000, (a.batch,), generator=g) for _ in range(a.nbatches)]
    t0 = None
    for i in range(a.warmup + a.iters):
        if i == a.warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        k = i % a.nbatches
        x, y = xs[k].to("cuda"), ys[k].to("cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / a.iters
    print(f"train_ddp: rank {dist.get_rank()} of {dist.get_world_size()}, {a.model}, batch {a.batch} "
          f"per rank: {ms:.2f} ms/iter, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
