"""torch.profiler under the shim sees the GPU: three copies under profile(CPU, CUDA) must give
GPU-side events (a bug once: none, in every mode, because the shim's cuptiActivityRegisterCallbacks
did not find PyTorch's libcupti), and so must a second profile after the first one stopped.  Under
`pinwheel run --trace`, the first profile takes CUPTI over from pinwheel's collector (the handoff).
Prints the counts; exit status 1 when a profile saw no GPU-side event.
    LD_PRELOAD=build/libpinwheel.so python3 tests/gpu/torch_profiler.py
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

x = torch.randn(1 << 22)
g = x.cuda()
for _ in range(4):  # copies before the first profile (in a pinwheel trace, before the handoff)
    g.copy_(x)
torch.cuda.synchronize()
ok = True
for run in (1, 2):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for _ in range(3):
            g.copy_(x)
        torch.cuda.synchronize()
    ev = p.events()
    gpu = sum(1 for e in ev if e.device_type.name == "CUDA")
    print(f"torch.profiler, profile {run}: {gpu} GPU-side events of {len(ev)}", flush=True)
    ok = ok and gpu > 0
sys.exit(0 if ok else 1)
