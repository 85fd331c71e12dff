"""N blocking x.to('cuda') from pageable tensors and N non_blocking copies from pinned ones, each
of --mb MiB, so the observe-mode summary can be checked against what the script did."""
import sys

import torch

n = int(sys.argv[1])
mb = int(sys.argv[2]) if len(sys.argv) > 2 else 4
numel = mb * (1 << 20) // 4
page = torch.arange(numel, dtype=torch.float32)
pinned = page.clone().pin_memory()
torch.cuda.init()
for _ in range(n):
    a = page.to("cuda")
for _ in range(n):
    b = pinned.to("cuda", non_blocking=True)
c = (a * 2 + b).sum()  # a few kernel launches
torch.cuda.synchronize()
assert torch.equal(a.cpu(), page) and torch.equal(b.cpu(), page)
print("torch_copies done", n)
