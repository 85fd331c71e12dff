#!/usr/bin/env python3
"""What the collector, or each of CUPTI's activity kinds, costs a workload, measured inside one process.

Two processes, one traced and one not, differ by more than the collector: one session saw whole
runs' host copies twice as slow for a minute at a time, which moved paired runs by -36 to +74 %.
Here each process runs traced, and every PHASE steps the kinds a mask names are switched off or
back on (A B B A order, 3 steps to settle after each switch): the phases' ratio is what those
kinds cost, the machine's drift cancelled.  Needs a shim built with -DPINWHEEL_TRACE_DIAG=ON
(it exports pw_diag_cupti); PyTorch and a GPU.

    cmake -S . -B build-diag -DPINWHEEL_TESTS=OFF -DPINWHEEL_ANALYZER=OFF -DPINWHEEL_TRACE_DIAG=ON
    cmake --build build-diag -j
    python3 bench/collector_kinds.py --build build-diag --workloads copybound,resnet,d2h --modes stage,off

Workloads (bench.py's collector classes written as a step function): copybound is
samples/train_copybound.py --mode naive, resnet samples/train_naive.py (ResNet-50, batch 256, bf16,
an NVTX range per step), d2h samples/infer_d2h.py --mode naive; each under PINWHEEL_MODE stage
(pinwheel) or off, traced as `pinwheel run --trace` traces (.json.gz, NVTX injected).

Mask bits (shim/collector/trace.c, kinds[]): 0x1 kernels, 0x2 memcpy, 0x4 peer memcpy, 0x8 memset,
0x10 runtime calls, 0x20 driver calls, 0x40 synchronization, 0x80 NVTX markers, 0x100 external
correlations (0x1ff: all of them, i.e. traced against CUPTI attached with nothing enabled);
0x200: every driver call's record against those the report reads only; 0x400 (the default),
alone: the whole collector, traced against CUPTI detached (cuptiFinalize) with pinwheel's own
calls to it stopped, which is what separates a traced process from an untraced one; 0x400 with
kind bits: CUPTI attached with those kinds only against detached (a kind's cost that switching
it off does not take back, such as work CUPTI does as modules load, shows here).  Each line:
ms per step with the kinds on and off (medians of the phases), the on/off - 1 of each A/B pair
and their median, and the host's time per step in the step's parts (copybound: x.to('cuda'),
pinwheel's staging, y.to and the rest); then a table of every process (--md writes it to a file).

For reference, --tracer torch-cuda (or torch) runs the same phases with torch.profiler on and off
instead (CUDA activity, or CPU and CUDA; Kineto over CUPTI too; the shim preloaded but untraced,
so any build will do; TEARDOWN_CUPTI=1, so that Kineto detaches CUPTI when it stops, as mask
0x400 does): what another CUPTI tracer costs the same loop, its records processed between phases,
outside the timing.  torch 2.11's Kineto with TEARDOWN_CUPTI=1 hangs when the process exits, with
the shim preloaded or not, so these children leave with os._exit once their figures are out.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "samples")


def copybound(parts):
    """samples/train_copybound.py --mode naive: 256 MiB float32 batches, a small MLP; the host's
    time in x.to('cuda') (pinwheel's staging), y.to and the rest of the step go to parts."""
    sys.path.insert(0, SAMPLES)
    import train_copybound as tcb
    xs, ys, model, opt = tcb.setup()

    def step(i):
        a = time.perf_counter()
        x = xs[i % 3].to("cuda")
        b = time.perf_counter()
        y = ys[i % 3].to("cuda")
        c = time.perf_counter()
        tcb.train_step(model, opt, x, y)
        parts(("x.to", b - a), ("y.to", c - b), ("rest", time.perf_counter() - c))
    return step


def resnet(parts):
    """samples/train_naive.py: ResNet-50, batch 256, bf16, channels_last, an NVTX range per step."""
    import torch
    sys.path.insert(0, SAMPLES)
    import train_common as tc
    args = argparse.Namespace(batch=256, size=224, nbatches=4, deterministic=False)
    model, opt, xs, ys = tc.setup(args)

    def step(i):
        torch.cuda.nvtx.range_push(f"train_step#{i}")
        a = time.perf_counter()
        x, y = xs[i % 4].to("cuda"), ys[i % 4].to("cuda")
        b = time.perf_counter()
        tc.step(model, opt, x, y)
        torch.cuda.nvtx.range_pop()
        parts(("x.to", b - a), ("rest", time.perf_counter() - b))
    return step


def d2h(parts):
    """samples/infer_d2h.py --mode naive: 12 bf16 matmuls, a 128 MiB float32 output .cpu() each
    step, read by the host."""
    import torch
    torch.manual_seed(0)
    x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
    ws = [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64 for _ in range(12)]

    def step(i):
        a = time.perf_counter()
        h = x + i
        for w in ws:
            h = torch.nn.functional.gelu(h @ w)
        h = h.float()
        b = time.perf_counter()
        out = h.cpu()
        float(out[0, 0])
        parts(("launch", b - a), (".cpu()", time.perf_counter() - b))
    return step


WORKLOADS = {"copybound": (copybound, 25), "resnet": (resnet, 10), "d2h": (d2h, 25)}


def torch_tracer(acts):
    """A switch(on) that runs torch.profiler (Kineto over its own CUPTI) with these activities
    while on; its records are processed when it stops, between phases, outside the timing."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    kinds = [getattr(ProfilerActivity, a) for a in acts]
    cur = [None]

    def switch(on):
        if on and not cur[0]:
            cur[0] = profile(activities=kinds)
            cur[0].__enter__()
        elif not on and cur[0]:
            torch.cuda.synchronize()
            cur[0].__exit__(None, None, None)
            cur[0] = None
        return 0
    return switch


TRACERS = {"pinwheel": None, "torch-cuda": ("CUDA",), "torch": ("CPU", "CUDA")}


def child(workload, mode, mask, phases, steps, tracer):
    import torch
    if TRACERS[tracer]:
        switch = torch_tracer(TRACERS[tracer])
        diag = lambda m, on: switch(on)
    else:
        try:
            diag = ctypes.CDLL(None).pw_diag_cupti
        except AttributeError:
            sys.exit("pw_diag_cupti not found: preload a shim built with -DPINWHEEL_TRACE_DIAG=ON")
    host = {1: {}, 0: {}}
    state = [None]

    def parts(*kv):
        if state[0] is not None:
            for k, v in kv:
                host[state[0]].setdefault(k, []).append(v * 1e3)

    step = WORKLOADS[workload][0](parts)
    steps = steps or WORKLOADS[workload][1]
    for i in range(10):
        step(i)
    res, i = {1: [], 0: []}, 10
    for p in range(phases):
        on = 1 if p % 4 in (0, 3) else 0
        torch.cuda.synchronize()
        r = diag(mask, on)
        if r < 0:
            sys.exit("pw_diag_cupti: not tracing (PINWHEEL_TRACE unset, or CUPTI not usable)")
        if r > 0:
            print(f"warning: CUPTI refused {r} of the calls switching mask {mask:#x} {'on' if on else 'off'}",
                  file=sys.stderr, flush=True)
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
    if TRACERS[tracer]:
        diag(mask, 0)  # the profiler, still on, stops
    pairs = [b / a - 1 for a, b in zip(res[0], res[1])]
    med = statistics.median
    split = ", ".join(f"{k} {med(v):.3f}/{med(host[0][k]):.3f}" for k, v in host[1].items())
    what = f"mask {mask:#x}" if not TRACERS[tracer] else f"tracer {tracer}"
    print(f"{workload}, mode {mode}, {what}: on {med(res[1]):.3f} ms/step, off {med(res[0]):.3f}; "
          f"on/off - 1 per pair {', '.join(f'{100 * x:+.1f}' for x in pairs)}; median {100 * med(pairs):+.1f} %; "
          f"host ms per step on/off: {split}", flush=True)
    print("#json " + json.dumps({"on": med(res[1]), "off": med(res[0]), "pairs": pairs, "median": med(pairs),
                                 "host": split}), flush=True)
    if TRACERS[tracer]:  # Kineto's exit hang (above)
        os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build-diag", help="the build directory of a -DPINWHEEL_TRACE_DIAG=ON shim")
    ap.add_argument("--masks", default="0x400", help="comma-separated masks, one process each")
    ap.add_argument("--workloads", default="copybound",
                    help="comma-separated, of " + ", ".join(WORKLOADS) + " (one process per mask each)")
    ap.add_argument("--modes", default="stage", help="PINWHEEL_MODE of the processes, comma-separated (stage, off)")
    ap.add_argument("--phases", type=int, default=16, help="phases per process (half on, half off)")
    ap.add_argument("--steps", type=int, default=0,
                    help="timed steps per phase (default: " +
                    ", ".join(f"{w} {n}" for w, (_, n) in WORKLOADS.items()) + ")")
    ap.add_argument("--tracer", default="pinwheel", choices=list(TRACERS),
                    help="pinwheel: its collector, switched by the masks; torch-cuda, torch: for reference, "
                    "torch.profiler with CUDA activity (or CPU and CUDA) on and off, the shim untraced "
                    "(masks ignored; no -DPINWHEEL_TRACE_DIAG build needed)")
    ap.add_argument("--md", help="also write the table here (markdown)")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], int(a.child[2], 0), a.phases, a.steps, a.child[3])
        return
    for w in a.workloads.split(","):
        if w not in WORKLOADS:
            ap.error(f"--workloads: {w!r} is none of " + ", ".join(WORKLOADS))
    b = os.path.abspath(a.build)
    if not os.path.exists(os.path.join(b, "libpinwheel.so")):
        sys.exit(f"collector_kinds: no libpinwheel.so in {b} (--build)")
    rows, rc = [], 0
    with tempfile.TemporaryDirectory(prefix="pw-kinds-") as tdir:
        for w in a.workloads.split(","):
            for mode in a.modes.split(","):
                env = dict(os.environ, LD_PRELOAD=os.path.join(b, "libpinwheel.so"), PINWHEEL_MODE=mode)
                if a.tracer == "pinwheel":
                    env.update(PINWHEEL_TRACE=os.path.join(tdir, "t.json.gz"),
                               NVTX_INJECTION64_PATH=os.path.join(b, "libpinwheel_nvtx.so"))
                else:  # untraced by pinwheel; Kineto detaches CUPTI when it stops, as mask 0x400 does
                    env.pop("PINWHEEL_TRACE", None)
                    env.pop("NVTX_INJECTION64_PATH", None)
                    env["TEARDOWN_CUPTI"] = "1"
                for m in a.masks.split(",") if a.tracer == "pinwheel" else ["0"]:
                    p = subprocess.run([sys.executable, __file__, "--child", w, mode, m, a.tracer, "--phases",
                                        str(a.phases), "--steps", str(a.steps)], env=env, capture_output=True,
                                       text=True, timeout=900)
                    found = [json.loads(line[6:]) for line in p.stdout.splitlines() if line.startswith("#json ")]
                    if p.returncode or not found:
                        print(f"{w}, mode {mode}, {a.tracer} {m}: failed ({p.returncode}): {p.stderr.strip()[-400:]}",
                              flush=True)
                        rc = 1
                        continue
                    print("\n".join(x for x in p.stdout.splitlines() if not x.startswith("#json ")), flush=True)
                    r = found[0]
                    rows.append([w, mode, m if a.tracer == "pinwheel" else a.tracer, f"{r['on']:.3f} / {r['off']:.3f}", f"{100 * r['median']:+.1f} %",
                                 " ".join(f"{100 * x:+.1f}" for x in r["pairs"]), r["host"]])
    head = ["workload", "PINWHEEL_MODE", "mask or tracer", "on / off (ms per step)", "overhead, median",
            "each pair (%)", "host ms per step on/off"]
    md = [f"| {' | '.join(head)} |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    print("\n".join(md), flush=True)
    if a.md:
        with open(a.md, "w") as f:
            f.write("\n".join(md) + "\n")
    sys.exit(rc)


if __name__ == "__main__":
    main()
