#!/usr/bin/env python3
"""What each of CUPTI's activity kinds costs the copy-bound loop, measured inside one process.

Two processes, one traced and one not, differ by more than the collector: one session saw whole
runs' host copies twice as slow for a minute at a time, which moved paired runs by -36 to +74 %.
Here each process runs traced, and every PHASE steps the kinds a mask names are switched off or
back on (A B B A order, a few steps to settle after each switch): the phases' ratio is what those
kinds cost, the machine's drift cancelled.  Needs a shim built with -DPINWHEEL_TRACE_DIAG=ON
(it exports pw_diag_cupti); PyTorch and a GPU.

    cmake -S . -B build-diag -DPINWHEEL_TESTS=OFF -DPINWHEEL_ANALYZER=OFF -DPINWHEEL_TRACE_DIAG=ON
    cmake --build build-diag -j
    python3 bench/collector_kinds.py --build build-diag --masks 0x400,0x1ff,0x20

Mask bits (shim/collector/trace.c, kinds[]): 0x1 kernels, 0x2 memcpy, 0x4 peer memcpy, 0x8 memset,
0x10 runtime calls, 0x20 driver calls, 0x40 synchronization, 0x80 NVTX markers, 0x100 external
correlations (0x1ff: all of them, i.e. traced against CUPTI attached with nothing enabled);
0x200: every driver call's record against those the report reads only; 0x400, alone: the whole
collector, traced against CUPTI detached (cuptiFinalize) with pinwheel's own calls to it stopped,
which is what separates a traced process from an untraced one.  Each line: ms per step
with the kinds on and off (medians of the phases), the on/off - 1 of each A/B pair and their
median, and the host's time per step in x.to('cuda') (pinwheel's staging), y.to and the rest.
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time


def child(mask, phases, steps):
    import torch
    import torch.nn.functional as F
    try:
        diag = ctypes.CDLL(None).pw_diag_cupti
    except AttributeError:
        sys.exit("pw_diag_cupti not found: preload a shim built with -DPINWHEEL_TRACE_DIAG=ON")
    torch.manual_seed(0)
    rows = (256 << 20) // (4 * 4096)  # 256 MiB float32 batches, as samples/train_copybound.py
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(rows, 4096, generator=g) for _ in range(3)]
    ys = [torch.randint(0, 10, (rows,), generator=g) for _ in range(3)]
    model = torch.nn.Sequential(torch.nn.Linear(4096, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    host = {1: [[], [], []], 0: [[], [], []]}
    state = [None]

    def step(i):
        a = time.perf_counter()
        x = xs[i % 3].to("cuda")
        b = time.perf_counter()
        y = ys[i % 3].to("cuda")
        c = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        d = time.perf_counter()
        if state[0] is not None:
            for k, v in enumerate((b - a, c - b, d - c)):
                host[state[0]][k].append(v * 1e3)

    for i in range(10):
        step(i)
    res, i = {1: [], 0: []}, 10
    for p in range(phases):
        on = 1 if p % 4 in (0, 3) else 0
        torch.cuda.synchronize()
        if diag(mask, on) < 0:
            sys.exit("pw_diag_cupti: not tracing (PINWHEEL_TRACE unset, or CUPTI not usable)")
        for _ in range(3):  # settle
            step(i)
            i += 1
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        state[0] = on
        for _ in range(steps):
            step(i)
            i += 1
        torch.cuda.synchronize()
        state[0] = None
        res[on].append((time.perf_counter() - t0) * 1e3 / steps)
    pairs = [b / a - 1 for a, b in zip(res[0], res[1])]
    med = statistics.median
    print(f"mask {mask:#x}: on {med(res[1]):.3f} ms/step, off {med(res[0]):.3f}; on/off - 1 per pair "
          f"{', '.join(f'{100 * x:+.1f}' for x in pairs)}; median {100 * med(pairs):+.1f} %; host per step "
          f"on/off: x.to {med(host[1][0]):.3f}/{med(host[0][0]):.3f} ms, y.to {med(host[1][1]):.3f}/"
          f"{med(host[0][1]):.3f}, rest {med(host[1][2]):.3f}/{med(host[0][2]):.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build-diag", help="the build directory of a -DPINWHEEL_TRACE_DIAG=ON shim")
    ap.add_argument("--masks", default="0x400,0x1ff,0x20", help="comma-separated masks, one process each")
    ap.add_argument("--phases", type=int, default=16, help="phases per process (half on, half off)")
    ap.add_argument("--steps", type=int, default=25, help="timed steps per phase")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(int(a.child, 0), a.phases, a.steps)
        return
    b = os.path.abspath(a.build)
    with tempfile.TemporaryDirectory(prefix="pw-kinds-") as tdir:
        env = dict(os.environ, LD_PRELOAD=os.path.join(b, "libpinwheel.so"), PINWHEEL_MODE="stage",
                   PINWHEEL_TRACE=os.path.join(tdir, "t.json.gz"),
                   NVTX_INJECTION64_PATH=os.path.join(b, "libpinwheel_nvtx.so"))
        rc = 0
        for m in a.masks.split(","):
            p = subprocess.run([sys.executable, __file__, "--child", m, "--phases", str(a.phases),
                                "--steps", str(a.steps)], env=env, capture_output=True, text=True)
            print(p.stdout.strip() or f"mask {m}: failed ({p.returncode}): {p.stderr.strip()[-400:]}", flush=True)
            rc |= p.returncode
    sys.exit(1 if rc else 0)


if __name__ == "__main__":
    main()
