"""torch.profiler Chrome traces of a small training loop, for the analyzer's fixtures:
   make_traces.py naive|prefetch OUT.json.gz
naive: pageable batches, blocking .to('cuda'); prefetch: pinned + side stream + non_blocking.
ResNet-18, batch 64, 112 px, bf16 autocast; profiler schedule: wait 2, warmup 2, active 3."""
import sys

import torch
import torch.nn.functional as F
import torchvision
from torch.profiler import ProfilerActivity, profile, schedule

mode, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = torchvision.models.resnet18(weights=None).cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
xs = [torch.randn(64, 3, 112, 112).contiguous(memory_format=torch.channels_last) for _ in range(2)]
ys = [torch.randint(0, 1000, (64,)) for _ in range(2)]
side = torch.cuda.Stream()
if mode == "prefetch":
    xs = [x.pin_memory() for x in xs]
    ys = [y.pin_memory() for y in ys]


def load(i):
    k = i % 2
    if mode == "prefetch":
        with torch.cuda.stream(side):
            return xs[k].to("cuda", non_blocking=True), ys[k].to("cuda", non_blocking=True)
    return xs[k].to("cuda"), ys[k].to("cuda")


nxt = load(0)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
             schedule=schedule(wait=2, warmup=2, active=3),
             on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
    for i in range(7):
        if mode == "prefetch":
            torch.cuda.current_stream().wait_stream(side)
            x, y = nxt
            x.record_stream(torch.cuda.current_stream())
            nxt = load(i + 1)
        else:
            x, y = load(i)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        prof.step()
torch.cuda.synchronize()
print("trace written:", out)
