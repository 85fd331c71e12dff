"""A PyTorch loop with a profiler range: 10 iterations (a 64 MiB pageable batch in, a matmul, a
sync), torch.cuda.profiler.start() before iteration 4 and stop() after iteration 6, so a trace
taken with --trace-capture cudaProfilerApi holds iterations 4 to 6."""
import torch

x = torch.randn(16 * 1024 * 1024)  # 64 MiB float32, pageable
w = torch.randn(4096, 4096, device="cuda")
for it in range(1, 11):
    if it == 4:
        torch.cuda.profiler.start()
    y = x.to("cuda").view(4096, 4096) @ w
    torch.cuda.synchronize()
    if it == 6:
        torch.cuda.profiler.stop()
print("profiler range ok", float(y[0, 0]))
