"""torch.profiler under the shim sees the GPU: three copies under profile(CPU, CUDA) must give
GPU-side events (a bug once: none, in every mode, because the shim's cuptiActivityRegisterCallbacks
did not find PyTorch's libcupti).  Prints the count; exit status 1 when there is none.
    LD_PRELOAD=build/libpinwheel.so python3 tests/gpu/torch_profiler.py
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

x = torch.randn(1 << 22)
g = x.cuda()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    for _ in range(3):
        g.copy_(x)
    torch.cuda.synchronize()
ev = p.events()
gpu = sum(1 for e in ev if e.device_type.name == "CUDA")
print(f"torch.profiler: {gpu} GPU-side events of {len(ev)}")
sys.exit(0 if gpu > 0 else 1)
