"""A device-to-host heavy inference loop: each step computes a large float32 output (128 MiB by
default) and moves it back to the CPU.

    --mode naive     y.cpu() every step (pageable, freshly allocated)  (run it under pinwheel too)
    --mode pinned    hand-written: two pinned output buffers, copy_(non_blocking=True), an event,
                     and the host waits on the event before using the buffer
    --mode resident  the output stays on the GPU (the limit)

Prints ms/step; the outputs of the warm-up steps and of the last step are compared byte for byte
with a copy made through a pinned buffer (a path pinwheel does not stage), outside the timing.
"""
import argparse
import time

import torch

import profiling


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["naive", "pinned", "resident"], default="naive")
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    profiling.add_args(p)
    a = p.parse_args()
    torch.manual_seed(0)
    x = torch.randn(a.rows, a.width, device="cuda", dtype=torch.bfloat16)
    ws = [torch.randn(a.width, a.width, device="cuda", dtype=torch.bfloat16) / a.width ** 0.5
          for _ in range(a.layers)]

    def forward(i):
        h = x + i
        for w in ws:
            h = torch.nn.functional.gelu(h @ w)
        return h.float()  # rows x width float32: the output to move back

    bufs = [torch.empty(a.rows, a.width, pin_memory=True) for _ in range(2)] if a.mode == "pinned" else None
    checked = 0
    total = 0.0

    def check(i, out, y):
        ref = torch.empty(out.shape, pin_memory=True)
        ref.copy_(y)
        if not torch.equal(ref, out):
            raise SystemExit(f"infer_d2h {a.mode}: step {i}: output bytes differ")
        return 1

    prof = profiling.start(a, a.warmup)
    for i in range(a.warmup + a.iters):
        if i == a.warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        y = forward(i)
        if a.mode == "naive":
            out = y.cpu()
            if out.is_pinned():  # pinwheel never registers the program's memory
                raise SystemExit("infer_d2h naive: the output tensor became pinned")
        elif a.mode == "pinned":
            out = bufs[i % 2]
            out.copy_(y, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record()
            ev.synchronize()
        else:
            out = y
        total += float(out[0, 0])  # the host uses the output
        if a.mode != "resident" and i < a.warmup:
            checked += check(i, out, y)
        prof.step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / a.iters
    prof.stop()
    if a.mode != "resident":
        checked += check(i, out, y)
    mb = a.rows * a.width * 4 / 1e6
    print(f"infer_d2h {a.mode}: {mb:.0f} MB output: {ms:.2f} ms/step, checked {checked}, bytes ok",
          flush=True)


if __name__ == "__main__":
    main()
