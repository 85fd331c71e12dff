"""CUDA graph capture and replay under the shim: the static input is refreshed from pageable
memory (a staged copy) before each replay; the replayed output must equal eager execution."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 10)).cuda()
static_x = torch.zeros(4096, 1024, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        model(static_x)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_y = model(static_x)
for i in range(5):
    x = torch.randn(4096, 1024)  # pageable, 16 MiB
    static_x.copy_(x)
    g.replay()
    eager = model(x.cuda())
    torch.cuda.synchronize()
    assert torch.allclose(static_y, eager), f"replay {i} differs"
print("graph capture and replay under the shim: ok")
