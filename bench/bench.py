#!/usr/bin/env python3
"""pinwheel's benchmarks, all in one run (DESIGN.md §7): every variant interleaved (A B C A B C
...), at least 3 repetitions, medians, ratios against the naive run and the hand-written ideal of
the same run.  Absolute times move between machines; the ratios in one run are what we quote.

    python3 bench/bench.py --build build [--reps 3] [--only train,copy,bw,copybound,d2h,launch,threads,jax] [--md OUT.md]

The collector's overhead (`--only collector`): each workload class untraced and traced (under
pinwheel and with --mode off; .json.gz, or the formats --collector-formats names), interleaved;
the overhead is traced / untraced - 1 of the medians, and the target is at most 3 %; the traces'
sizes are listed too, and where pinwheel's own time went in each variant (its summary: the staging
threads' copies, their waits for pinned space and for a busy slot, the host syncs, the busiest
hooks), so a traced run's extra time can be placed.  With --collector-chunks the copy-bound loop
also runs with 1 MiB and 16 MiB chunks (4 times and a quarter as many DMAs, and CUDA calls, per
copy as the default 4 MiB): an overhead that follows the number of DMAs is a cost CUPTI adds to
each, not the writer's.  With --collector-threads it also runs with one staging thread fewer than
the CPUs: an overhead that this takes away is CUPTI's own threads (and the writer) taking a CPU
from the staging copies, whose slowest thread sets each copy's end.

Sync elision is pinwheel's default (PINWHEEL_SYNC=elide): the "+ pinwheel" variants elide, and the
PINWHEEL_SYNC=keep variants show what the syncs kept cost.

Training from a DataLoader (`--only loader`, about 8 minutes): samples/train_loader.py, batches of
256 224x224 float32 images (147 MiB) made by worker processes, ResNet-18 with 6 and with 10 workers
and ResNet-50 with 10: naive, naive under pinwheel (the default), naive under pinwheel with
PINWHEEL_SYNC=keep, and the hand-written pin_memory=True + non_blocking, each a process of 10 + 30
steps, and two bounds: the DataLoader alone (the rate its workers deliver batches at, no GPU work,
without pinwheel, so its main thread drops each batch itself: a variant near it is loader-bound)
and the data already on the GPU (no DataLoader); the ratio of pinwheel's throughput to pinned's
(targets: ResNet-50 >= 1.0, ResNet-18 >= 0.95), the syncs pinwheel elided per step and the batches
whose unmap it took off the training thread, with those it left there and why (its summary).

The options docs/RESULTS.md decides by measurement (`--only options`): naive_copy of 16 MiB
(deferred), of 16 MiB with 1 ms of host work a step, of 1 MiB and of 256 KiB, under pinwheel with
PINWHEEL_DEFER=0, PINWHEEL_STRICT=1 and PINWHEEL_MIN_BYTES=2M (below 2 MiB the copy is not staged;
at 16 MiB the default's twin, which shows its spread), against CUDA alone and ideal_copy.

Real libraries nobody here wrote, each skipped with a message when its package is missing:
    --only libs      (= cupy,numba,pin,hf,lightning)
    --only fill      CuPy's pattern in C (samples/pinned_fill): a memmove into pinned memory, then
                     its copy, without pinwheel, with it, and with PINWHEEL_FILL_AHEAD

On a machine of several GPUs (skipped with a message on one):
    --only ddp       DistributedDataParallel ResNet-50, a rank per GPU (samples/train_ddp.py under
                     torchrun): naive, under pinwheel, the hand-written prefetcher, and batches from
                     a DataLoader with forked workers; the slowest rank's ms/iter, and the ranks'
                     parameters must agree (a run where they differ fails)
    --only aggbw     aggregate H2D bandwidth, one process per GPU copying at the same time
                     (copy_bw 256 h2d N): the pinned DMA's own figure, CUDA's pageable copy, pinwheel,
                     and pinwheel without its NUMA placement (PINWHEEL_NUMA=0)
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd, env_extra, pattern, log):
    env = dict(os.environ)
    env.update(env_extra)
    t0 = time.time()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    log.write(f"$ {' '.join(f'{k}={v}' for k, v in env_extra.items())} {' '.join(cmd)}\n{out}\n")
    log.flush()
    m = re.search(pattern, out)
    if p.returncode != 0 or not m:
        envs = " ".join(f"{k}={v}" for k, v in env_extra.items())
        raise SystemExit(f"benchmark run failed ({p.returncode}): {envs} {' '.join(cmd)}\n{out[-3000:]}")
    return [None if g is None else float(g) for g in m.groups()], time.time() - t0


# --deadline: the time budget of this process, from its start (0: none); ARGS is the parsed command line
START = time.time()
ARGS = None


def interleave(variants, reps, pattern, log, after=None):
    """variants: [(name, cmd, env)] -> {name: [samples per group...]}; after(name, env, secs), when
    given, is called after each run.  Under --deadline it stops after the last whole round that the
    next would not fit behind (each round as long as the one before), so every variant has the same
    number of samples, and sets ARGS.reps to that number: the tables say how many they hold."""
    res = {name: [] for name, _, _ in variants}
    for r in range(reps):
        t_round = time.time()
        for name, cmd, env in variants:
            vals, secs = run(cmd, env, pattern, log)
            res[name].append(vals)
            print(f"  rep {r + 1} {name}: {vals} ({secs:.0f} s)", flush=True)
            if after:
                after(name, env, secs)
        left = ARGS.deadline - (time.time() - START) if ARGS and ARGS.deadline else None
        if left is not None and r + 1 < reps and left < time.time() - t_round:
            print(f"  stopping after {r + 1} of {reps} rounds: another would pass --deadline "
                  f"({left:.0f} s left)", flush=True)
            ARGS.reps = r + 1
            break
    return res


def time_spent(title, summaries):
    """Rows of where pinwheel's own time went, per variant, from its JSON summaries (ms, medians)."""
    def ms(js, get):
        return statistics.median(get(j) for j in js) / 1e6

    rows = []
    for name, js in summaries.items():
        hooks = {}
        for j in js:
            for h, c in j.get("calls", {}).items():
                hooks.setdefault(h, []).append(c.get("host_ns", 0))
        top = sorted(hooks.items(), key=lambda kv: -statistics.median(kv[1]))[:3]
        rows.append([title, name, f"{ms(js, lambda j: j.get('staging', {}).get('memcpy_ns', 0)):.1f}",
                     f"{ms(js, lambda j: j.get('staging', {}).get('wait_space_ns', 0)):.1f} "
                     f"({statistics.median(j.get('staging', {}).get('wait_space_events', 0) for j in js):.0f})",
                     f"{ms(js, lambda j: j.get('staging', {}).get('wait_lock_ns', 0)):.1f}",
                     f"{ms(js, lambda j: j.get('syncs', {}).get('host_ns', 0)):.1f}",
                     ", ".join(f"{h} {statistics.median(v) / 1e6:.1f}" for h, v in top if statistics.median(v) > 0)])
    return rows


def stats_env(path):
    """The environment that has pinwheel write its JSON summary to path (%p: the process id)."""
    return dict(PINWHEEL_STATS="1", PINWHEEL_STATS_FORMAT="json", PINWHEEL_STATS_FILE=path)


def default_threads(B, shim, tdir):
    """The staging threads pinwheel's default gives here (its summary of a short naive_copy run: the
    default also weighs the cgroup limit and the local ranks); the CPUs this process may use, at
    most 16, if that run fails."""
    f = os.path.join(tdir, "threads.json")
    env = dict(os.environ, **shim, **stats_env(f))
    try:
        subprocess.run([f"{B}/naive_copy", "8", "2", "0"], env=env, capture_output=True, timeout=120)
        with open(f) as fh:
            return int(json.load(fh)["staging"]["threads"])
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return min(16, len(os.sched_getaffinity(0)))
    finally:
        if os.path.exists(f):
            os.unlink(f)


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    except OSError:
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def run_per_gpu(cmd, env_extra, n, pattern, log):
    """cmd once per GPU, all at once, each seeing its GPU only and told its local rank (as torchrun
    tells a rank), the timed part starting at the same moment (COPY_BW_START_AT, after every
    process's set-up): [[floats] per process]"""
    start = time.time() + 5
    procs = []
    for i in range(n):
        env = dict(os.environ)
        env.update(env_extra)
        env.update(CUDA_VISIBLE_DEVICES=str(i), LOCAL_RANK=str(i), RANK=str(i), LOCAL_WORLD_SIZE=str(n),
                   COPY_BW_START_AT=f"{start:.3f}")
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    res = []
    for i, p in enumerate(procs):
        out = p.communicate(timeout=300)[0]
        log.write(f"$ [GPU {i}] {' '.join(f'{k}={v}' for k, v in env_extra.items())} {' '.join(cmd)}\n{out}\n")
        m = re.search(pattern, out)
        if p.returncode != 0 or not m:
            raise SystemExit(f"benchmark run failed on GPU {i} ({p.returncode}): {' '.join(cmd)}\n{out[-3000:]}")
        res.append([float(g) for g in m.groups()])
    log.flush()
    return res


def have(py, module):
    """Whether `module` imports under this Python; says so when it does not."""
    ok = subprocess.run([py, "-c", f"import {module}"], capture_output=True).returncode == 0
    if not ok:
        print(f"SKIP: {module} is not installed for {py}", flush=True)
    return ok


def med(samples, i=0):
    return statistics.median(s[i] for s in samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds this run may take: no round of a class is started that would not end "
                         "in time, and the tables hold the rounds made (0: no limit)")
    ap.add_argument("--only", default="train,copy,bw,copybound,d2h,launch,jax")
    ap.add_argument("--md", default=None, help="also write the tables here (markdown)")
    ap.add_argument("--log", default="bench.log")
    ap.add_argument("--train-iters", type=int, default=30)
    ap.add_argument("--train-short", action="store_true", help="leave out the data-on-GPU + sync variant")
    ap.add_argument("--copybound-short", action="store_true",
                    help="leave out the copy-bound loop's PINWHEEL_DEFER=0 variants")
    ap.add_argument("--loader-configs", default="resnet18:6,resnet18:10,resnet50:10",
                    help="--only loader: MODEL:WORKERS, comma-separated")
    ap.add_argument("--loader-quick", action="store_true",
                    help="--only loader: leave out the naive run without pinwheel, 5 + 15 steps a process")
    ap.add_argument("--bw-variants", default="", help="indices of the bw variants to run (default all)")
    ap.add_argument("--collector-formats", default="json.gz",
                    help="trace formats of --only collector, comma-separated (json, json.gz)")
    ap.add_argument("--collector-quick", action="store_true",
                    help="--only collector: ResNet-50 and the copy-bound loop, under pinwheel only")
    ap.add_argument("--collector-chunks", action="store_true",
                    help="--only collector: the copy-bound loop also with 1 MiB and 16 MiB chunks")
    ap.add_argument("--collector-threads", action="store_true",
                    help="--only collector: the copy-bound loop also with one staging thread fewer than the CPUs")
    a = ap.parse_args()
    global ARGS
    ARGS = a
    B = os.path.abspath(a.build)
    lib = os.path.join(B, "libpinwheel.so")
    shim = {"LD_PRELOAD": lib, "PINWHEEL_MODE": "stage"}
    # sync elision (PINWHEEL_SYNC=elide) is on in `shim`, pinwheel's default; keep compares
    keep = dict(shim, PINWHEEL_SYNC="keep")
    # deferral (PINWHEEL_DEFER=1) is on in `shim`: the copies that fit half the pinned pool and half
    # the ring return before their copy-in.  nodefer compares; bigpool lets 256 MiB batches defer.
    nodefer = dict(shim, PINWHEEL_DEFER="0")
    bigpool = dict(shim, PINWHEEL_HOST_POOL="512M")
    py = sys.executable
    only = a.only.replace("libs", "cupy,numba,pin,hf,lightning").split(",")
    md = []
    log = open(a.log, "w")

    def table(title, head, rows):
        md.append(f"\n### {title}\n\n| {' | '.join(head)} |\n|{'---|' * len(head)}")
        for r in rows:
            md.append("| " + " | ".join(r) + " |")
        print("\n".join(md[-len(rows) - 3:]), flush=True)

    if "train" in only:
        it = ["--iters", str(a.train_iters)]
        tn = [py, "samples/train_naive.py"] + it
        variants = [
            ("naive", tn, {}),
            ("naive + pinwheel", tn, shim),
            ("naive + pinwheel, PINWHEEL_SYNC=keep", tn, keep),
            ("naive + pinwheel, PINWHEEL_DEFER=0", tn, nodefer),
            ("naive + pinwheel, PINWHEEL_HOST_POOL=512M", tn, bigpool),
            ("prefetcher (hand-written)", [py, "samples/train_prefetch.py"] + it, {}),
            ("data on GPU (limit)", tn + ["--data", "gpu"], {}),
            ("data on GPU + a host sync per step", tn + ["--data", "gpu", "--sync-each-step"], {}),
        ]
        if a.train_short:
            variants = variants[:7]
        print("ResNet-50 training, batch 256, bf16:", flush=True)
        r = interleave(variants, a.reps, r"([\d.]+) ms/iter", log)
        base, pref = med(r["naive"]), med(r["prefetcher (hand-written)"])
        table("ResNet-50 training (batch 256, bf16, channels_last), median of %d" % a.reps,
              ["variant", "ms/iter", "throughput vs naive", "throughput vs prefetcher"],
              [[n, f"{med(v):.2f}", f"{base / med(v):.3f} x", f"{pref / med(v):.3f} x"] for n, v in r.items()])

    if "threads" in only:  # staging threads on the training loop (does a bigger pool help or hurt?)
        tn = [py, "samples/train_naive.py", "--iters", str(a.train_iters)]
        variants = [("naive + pinwheel, 8 threads", tn, dict(shim, PINWHEEL_THREADS="8")),
                    ("naive + pinwheel, 16 threads", tn, dict(shim, PINWHEEL_THREADS="16")),
                    ("prefetcher (hand-written)", [py, "samples/train_prefetch.py", "--iters", str(a.train_iters)], {})]
        print("ResNet-50 training, staging threads:", flush=True)
        r = interleave(variants, a.reps, r"([\d.]+) ms/iter", log)
        pref = med(r["prefetcher (hand-written)"])
        table("ResNet-50 training, staging threads, median of %d" % a.reps,
              ["variant", "ms/iter", "throughput vs prefetcher"],
              [[n, f"{med(v):.2f}", f"{pref / med(v):.3f} x"] for n, v in r.items()])

    if "loader" in only:  # batches from a DataLoader's worker processes (samples/train_loader.py)
        warm, iters = (5, 15) if a.loader_quick else (10, 30)
        configs = []
        for c in a.loader_configs.split(","):
            model, workers = c.split(":")
            name = {"resnet18": "ResNet-18", "resnet50": "ResNet-50"}[model]
            configs.append((f"{name}, {workers} workers", model, int(workers), 1.0 if model == "resnet50" else 0.95))
        tdir = tempfile.mkdtemp(prefix="pwbench-loader-")
        stats = stats_env(os.path.join(tdir, "stats-%p.json"))
        kinds = [("naive", "naive", {}),
                 ("naive + pinwheel", "naive", dict(shim, **stats)),
                 ("naive + pinwheel, PINWHEEL_SYNC=keep", "naive", dict(keep, **stats)),
                 ("pinned (pin_memory=True, non_blocking)", "pinned", {}),
                 ("the DataLoader alone (no GPU work)", "loader", {}),
                 ("data already on the GPU (no DataLoader)", "gpu", {})]
        if a.loader_quick:
            kinds = kinds[1:]
        # a bound depends on the workers alone (loader) or the model alone (gpu): run once for each
        scope = {"loader": lambda title, model, workers: f"{workers} workers",
                 "gpu": lambda title, model, workers: model}

        def vname(title, model, workers, kname, mode):
            return f"{scope.get(mode, lambda *c: c[0])(title, model, workers)}: {kname}"

        variants, named = [], set()
        for title, model, workers, _ in configs:
            cmd = [py, "samples/train_loader.py", "--model", model, "--workers", str(workers),
                   "--iters", str(iters), "--warmup", str(warm), "--channels-last"]
            for kname, mode, env in kinds:
                n = vname(title, model, workers, kname, mode)
                if n not in named:
                    named.add(n)
                    variants.append((n, cmd + ["--mode", mode], env))
        # a process: start-up, the workers' first batches, cuDNN's autotuning, then the steps
        est = a.reps * sum(4 if "alone" in n else 13 if "ResNet-50" in n else 9 for n, _, _ in variants)
        print(f"DataLoader training, batch 256 of 224x224 float32 (147 MiB), {len(variants)} variants x "
              f"{a.reps} reps, about {est / 60:.1f} minutes:", flush=True)
        summaries = {}

        def after(name, env, secs):  # pinwheel's summary of the process that used CUDA
            found = []
            for f in os.listdir(tdir):
                if f.startswith("stats-") and f.endswith(".json"):
                    try:
                        with open(os.path.join(tdir, f)) as fh:
                            found.extend(json.loads(line) for line in fh if line.strip())
                    except (OSError, ValueError):
                        pass
                    os.unlink(os.path.join(tdir, f))
            if found:
                summaries.setdefault(name, []).append(max(found, key=lambda j: j.get("intercepted", 0)))

        def per_step(name):  # syncs elided and kept per step (warm-up steps included), medians
            js = summaries.get(name)
            if not js:
                return "", ""
            el = statistics.median(j.get("staging", {}).get("sync_elided", 0) for j in js) / (warm + iters)
            kept, why = [], {}  # why: each reason's counts, one a process
            for j in js:
                k = j.get("staging", {}).get("sync_kept", j.get("sync_kept"))
                if isinstance(k, dict):
                    n = {r: v.get("calls", 0) if isinstance(v, dict) else v for r, v in k.items()}
                    kept.append(sum(n.values()))
                    for r, c in n.items():
                        why.setdefault(r, []).append(c)
            if not kept:
                return f"{el:.2f}", "n/a"
            steps = warm + iters  # each reason's median a step, the largest first: what keeps syncs
            parts = sorted(((statistics.median(c) / steps, r) for r, c in why.items()), reverse=True)
            reasons = ", ".join(f"{r} {v:.2f}" for v, r in parts if v >= 0.005)
            return f"{el:.2f}", f"{statistics.median(kept) / steps:.2f}" + (f" ({reasons})" if reasons else "")

        def drops(name):  # batches whose unmap left the training thread, and those left to it, a process
            js = summaries.get(name)
            if not js:
                return ""
            st = [j.get("staging", {}) for j in js]
            moved = statistics.median(x.get("shm_unmaps_deferred", 0) for x in st)
            left = {}
            for x in st:
                for k, v in (x.get("shm_unmaps_left") or {}).items():
                    left.setdefault(k, []).append(v)
            why = ", ".join(f"{k.replace('_', ' ')} {statistics.median(v):g}" for k, v in left.items()
                            if statistics.median(v))
            return f"{moved:g}" + (f" ({why})" if why else "")

        t0 = time.time()
        r = interleave(variants, a.reps, r"([\d.]+) ms/iter, [\d.]+ images/s(?:, final loss ([-\d.e+naif]+))?",
                       log, after)
        shutil.rmtree(tdir, ignore_errors=True)
        rows = []
        for title, model, workers, target in configs:
            pinned = med(r[f"{title}: pinned (pin_memory=True, non_blocking)"])
            naive = med(r[f"{title}: naive"]) if f"{title}: naive" in r else float("nan")
            for kname, mode, _ in kinds:
                n = vname(title, model, workers, kname, mode)
                v = med(r[n])
                el, kept = per_step(n)
                goal = ""
                if kname == "naive + pinwheel":
                    goal = f">= {target:.2f}: " + ("ok" if pinned / v >= target else "BELOW")
                    print(f"  {title}: pinwheel (default) / pinned throughput {pinned / v:.3f} "
                          f"(target {target:.2f}), {el} syncs elided per step", flush=True)
                losses = [s[1] for s in r[n] if s[1] is not None]  # none: a variant that trains nothing
                loss = f"{statistics.median(losses):.4f}" if losses else "-"
                rows.append([title, kname, f"{v:.2f}", f"{naive / v:.3f} x", f"{pinned / v:.3f} x", el, kept,
                             drops(n), loss, goal])
        table("Training from a DataLoader (samples/train_loader.py: batch 256 of 224x224 float32 made by worker "
              "processes, bf16 autocast, %d + %d steps a process), median of %d interleaved processes (%.1f "
              "minutes in all)" % (warm, iters, a.reps, (time.time() - t0) / 60),
              ["model, workers", "variant", "ms/iter", "throughput vs naive", "throughput vs pinned",
               "syncs elided per step", "syncs kept per step",
               "batches unmapped off the thread, a process (left to it)", "final loss (median)",
               "target (vs pinned)"], rows)

    if "copy" in only:
        args = ["64", "40", "6"]
        variants = [
            ("naive_copy", [f"{B}/naive_copy"] + args, {}),
            ("naive_copy + pinwheel", [f"{B}/naive_copy"] + args, shim),
            ("naive_copy + pinwheel, PINWHEEL_SYNC=keep", [f"{B}/naive_copy"] + args, keep),
            ("naive_copy + pinwheel, PINWHEEL_DEFER=0", [f"{B}/naive_copy"] + args, nodefer),
            ("naive_copy + pinwheel, PINWHEEL_HOST_POOL=512M", [f"{B}/naive_copy"] + args, bigpool),
            ("naive_copy, static runtime", [f"{B}/naive_copy_static"] + args, {}),
            ("naive_copy, static runtime + pinwheel", [f"{B}/naive_copy_static"] + args, shim),
            ("ideal_copy (hand-written)", [f"{B}/ideal_copy"] + args, {}),
        ]
        print("naive_copy (64 MiB batch, 6 ms kernel):", flush=True)
        r = interleave(variants, a.reps, r"([\d.]+) ms/iter, checksum ok", log)
        ideal = med(r["ideal_copy (hand-written)"])
        table("naive_copy: 64 MiB pageable cudaMemcpy + 6 ms kernel per iteration, median of %d" % a.reps,
              ["variant", "ms/iter", "time vs ideal"],
              [[n, f"{med(v):.3f}", f"{med(v) / ideal:.3f} x"] for n, v in r.items()])

    if "jax" in only:  # the driver front end: JAX reaches CUDA without the runtime
        put = [py, "samples/jax_put.py", "--mib", "256"]
        variants = [("JAX", put, {}), ("JAX + pinwheel", put, shim)]
        print("jax.device_put of a 256 MiB numpy array:", flush=True)
        r = interleave(variants, a.reps, r"device_put ([\d.]+) GB/s .*device_get ([\d.]+) GB/s, bytes ok", log)
        table("jax.device_put / device_get of a 256 MiB numpy array (GB/s, median of %d runs of median-of-7)"
              % a.reps, ["path", "device_put, until ready", "device_get"],
              [[n, f"{med(v, 0):.1f}", f"{med(v, 1):.1f}"] for n, v in r.items()])
        jc = [py, "samples/jax_copybound.py", "--iters", "20"]
        variants = [("JAX, numpy batches", jc, {}), ("JAX, numpy batches + pinwheel", jc, shim),
                    ("JAX, numpy batches + pinwheel, PINWHEEL_SYNC=keep", jc, keep),
                    ("JAX, batches already on the GPU (limit)", jc + ["--data", "device"], {})]
        print("JAX copy-bound loop (256 MiB float32 batch per step, small MLP):", flush=True)
        r = interleave(variants, a.reps, r"([\d.]+) ms/iter", log)
        base, lim = med(r["JAX, numpy batches"]), med(r["JAX, batches already on the GPU (limit)"])
        table("JAX copy-bound training loop (256 MiB float32 numpy batch per step, small MLP), median of %d"
              % a.reps, ["variant", "ms/iter", "speedup vs JAX", "throughput vs data on GPU"],
              [[n, f"{med(v):.2f}", f"{base / med(v):.2f} x", f"{lim / med(v):.3f} x"] for n, v in r.items()])

    if "bw" in only:
        bw = [f"{B}/copy_bw", "256"]
        variants = [("CUDA runtime", bw, {}),
                    ("pinwheel (defaults)", bw, shim),
                    ("pinwheel, 8 threads", bw, dict(shim, PINWHEEL_THREADS="8"))]
        if a.bw_variants:
            chosen = a.bw_variants.split(",")
            variants = [v for i, v in enumerate(variants) if str(i) in chosen]
        print("one 256 MiB pageable copy:", flush=True)
        r = interleave(variants, a.reps,
                       r"host-blocking ([\d.]+) GB/s, H2D until on device ([\d.]+) GB/s, D2H ([\d.]+) GB/s, "
                       r"D2H fresh ([\d.]+) GB/s, first copy ([\d.]+) ms", log)
        table("One 256 MiB pageable copy (GB/s, median of %d runs of median-of-7)" % a.reps,
              ["path", "H2D host-blocking", "H2D until on device", "D2H (blocking)",
               "D2H, fresh destination", "first copy (ms)"],
              [[n, f"{med(v, 0):.1f}", f"{med(v, 1):.1f}", f"{med(v, 2):.1f}", f"{med(v, 3):.1f}",
                f"{med(v, 4):.1f}"] for n, v in r.items()])

    if "options" in only:  # the options docs/RESULTS.md decides by measurement
        # naive_copy with copies pinwheel defers (16 MiB: under half the default pool), once with a
        # busy host (1 ms of its own work after each launch, the kernel 0.5 ms: what a copy returned
        # early gives), and with copies near PINWHEEL_MIN_BYTES (256 KiB, 1 MiB); each against CUDA
        # alone and the hand-written pinned copy, interleaved
        rows = []
        for size, args in (("16", ["16", "200", "1"]), ("16, host 1 ms", ["16", "200", "0.5", "1"]),
                           ("1", ["1", "400", "0.2"]), ("256K", ["256K", "400", "0.1"])):
            nc = [f"{B}/naive_copy"] + args
            variants = [(f"{size}: naive_copy", nc, {}),
                        (f"{size}: + pinwheel", nc, shim),
                        (f"{size}: + pinwheel, PINWHEEL_DEFER=0", nc, nodefer),
                        (f"{size}: + pinwheel, PINWHEEL_STRICT=1", nc, dict(shim, PINWHEEL_STRICT="1")),
                        (f"{size}: + pinwheel, PINWHEEL_MIN_BYTES=2M "
                         + ("(staged all the same: the default's twin, its spread)" if args[0] == "16"
                            else "(not staged)"), nc,
                         dict(shim, PINWHEEL_MIN_BYTES="2M")),
                        (f"{size}: ideal_copy (hand-written)", [f"{B}/ideal_copy"] + args, {})]
            print(f"naive_copy {' '.join(args)} (MiB, iterations, kernel ms, host ms):", flush=True)
            r = interleave(variants, a.reps, r"([\d.]+) ms/iter, checksum ok", log)
            base = med(r[f"{size}: naive_copy"])
            rows += [[n, f"{med(v):.3f}", f"{base / med(v):.3f} x"] for n, v in r.items()]
        table("Options to decide (docs/RESULTS.md, \"Options, decided by measurement\"): naive_copy, "
              "median of %d" % a.reps, ["variant", "ms/iter", "speedup vs naive_copy"], rows)

    if "copybound" in only:
        cb = [py, "samples/train_copybound.py", "--iters", "30"]
        variants = [("naive", cb + ["--mode", "naive"], {}),
                    ("naive + pinwheel", cb + ["--mode", "naive"], shim),
                    ("naive + pinwheel, PINWHEEL_SYNC=keep", cb + ["--mode", "naive"], keep),
                    ("naive + pinwheel, PINWHEEL_DEFER=0", cb + ["--mode", "naive"], nodefer),
                    ("naive + pinwheel, PINWHEEL_DEFER=0, PINWHEEL_SYNC=keep", cb + ["--mode", "naive"],
                     dict(nodefer, PINWHEEL_SYNC="keep")),
                    ("pre-pinned, copied at the step and waited for (bound with the program's wait)",
                     cb + ["--mode", "waited"], {}),
                    ("prefetcher (pre-pinned, side stream)", cb + ["--mode", "prefetch"], {}),
                    ("data on GPU (limit)", cb + ["--mode", "resident"], {})]
        if a.copybound_short:
            variants = [v for v in variants if "PINWHEEL_DEFER=0" not in v[0]]
        print("copy-bound training loop (256 MiB float32 batch, small MLP):", flush=True)
        r = interleave(variants, a.reps, r"([\d.]+) ms/step, loss [-\d.]+, bytes ok", log)
        base, pref = med(r["naive"]), med(r["prefetcher (pre-pinned, side stream)"])
        table("Copy-bound training loop (256 MiB float32 batch per step, small MLP), median of %d" % a.reps,
              ["variant", "ms/step", "throughput vs naive", "throughput vs prefetcher"],
              [[n, f"{med(v):.2f}", f"{base / med(v):.3f} x", f"{pref / med(v):.3f} x"] for n, v in r.items()])

    if "d2h" in only:
        inf = [py, "samples/infer_d2h.py", "--iters", "30"]
        variants = [("naive (.cpu())", inf + ["--mode", "naive"], {}),
                    ("naive + pinwheel", inf + ["--mode", "naive"], shim),
                    ("naive + pinwheel, PINWHEEL_SYNC=keep", inf + ["--mode", "naive"], keep),
                    ("pinned buffers + non_blocking + events", inf + ["--mode", "pinned"], {}),
                    ("output stays on GPU (limit)", inf + ["--mode", "resident"], {})]
        print("D2H-heavy inference (128 MiB float32 output per step):", flush=True)
        r = interleave(variants, a.reps, r"([\d.]+) ms/step, checked \d+, bytes ok", log)
        pinned = med(r["pinned buffers + non_blocking + events"])
        table("D2H-heavy inference (128 MiB float32 output moved back every step), median of %d" % a.reps,
              ["variant", "ms/step", "time vs pinned hand-written"],
              [[n, f"{med(v):.2f}", f"{med(v) / pinned:.3f} x"] for n, v in r.items()])

    if "launch" in only:
        cmd = [f"{B}/launch_bench", "200000"]
        variants = [("no shim", cmd, {}),
                    ("off", cmd, {"LD_PRELOAD": lib, "PINWHEEL_MODE": "off"}),
                    ("observe", cmd, {"LD_PRELOAD": lib, "PINWHEEL_MODE": "observe"}),
                    ("stage", cmd, {"LD_PRELOAD": lib, "PINWHEEL_MODE": "stage"}),
                    ("stage, PINWHEEL_SYNC=keep", cmd, keep)]
        print("hook overhead, 200k empty launches:", flush=True)
        r = interleave(variants, a.reps, r"([\d.]+) ns/launch", log)
        base = med(r["no shim"])
        table("Hook overhead: 200,000 empty kernel launches, median of %d" % a.reps,
              ["variant", "ns/launch", "vs no shim"],
              [[n, f"{med(v):.1f}", f"{med(v) / base:.3f} x"] for n, v in r.items()])

    if "cupy" in only and have(py, "cupy"):  # CuPy stages cp.asarray itself, through the runtime
        put = [py, "samples/cupy_put.py", "--mib", "256"]
        variants = [("CuPy", put, {}), ("CuPy + pinwheel", put, shim),
                    ("CuPy + pinwheel, PINWHEEL_FILL_AHEAD=512M", put, dict(shim, PINWHEEL_FILL_AHEAD="512M"))]
        print("CuPy asarray / asnumpy of a 256 MiB numpy array:", flush=True)
        r = interleave(variants, a.reps, r"asarray ([\d.]+) GB/s, asarray burst of \d+ ([\d.]+) GB/s, "
                       r"asnumpy ([\d.]+) GB/s, bytes ok", log)
        table("CuPy: cp.asarray / cp.asnumpy of a 256 MiB numpy array (GB/s, median of %d runs of median-of-7)"
              % a.reps, ["path", "asarray + synchronize", "asarray, 4 back to back", "asnumpy"],
              [[n, f"{med(v, 0):.1f}", f"{med(v, 1):.1f}", f"{med(v, 2):.1f}"] for n, v in r.items()])

    if "fill" in only:  # CuPy's pattern in C: a memmove into pinned memory, then the DMA
        pf = [f"{B}/pinned_fill", "256", "7"]
        variants = [("CUDA runtime", pf, {}), ("pinwheel", pf, shim),
                    ("pinwheel, PINWHEEL_FILL_AHEAD=512M", pf, dict(shim, PINWHEEL_FILL_AHEAD="512M"))]
        print("a 256 MiB memmove into pinned memory, then its copy to the device:", flush=True)
        r = interleave(variants, a.reps, r"fill \+ copy ([\d.]+) GB/s .*bytes ok", log)
        table("The program's fill of its pinned memory and the copy of it (samples/pinned_fill, 256 MiB, "
              "GB/s of fill + copy + synchronize, median of %d runs of median-of-7)" % a.reps,
              ["path", "GB/s"], [[n, f"{med(v):.1f}"] for n, v in r.items()])

    if "numba" in only and have(py, "numba.cuda"):  # the driver API (cuMemcpyHtoD / DtoH)
        put = [py, "samples/numba_put.py", "--mib", "256"]
        variants = [("numba", put, {}), ("numba + pinwheel", put, shim)]
        print("numba to_device / copy_to_host of a 256 MiB numpy array:", flush=True)
        r = interleave(variants, a.reps, r"to_device ([\d.]+) GB/s, copy_to_host ([\d.]+) GB/s, bytes ok", log)
        table("numba: cuda.to_device / copy_to_host of a 256 MiB numpy array (GB/s, median of %d runs of "
              "median-of-7)" % a.reps, ["path", "to_device", "copy_to_host"],
              [[n, f"{med(v, 0):.1f}", f"{med(v, 1):.1f}"] for n, v in r.items()])

    if "pin" in only:  # PyTorch's own pinned paths: recorded as the program's, must get no slower
        pin = [py, "samples/torch_pin.py", "--mib", "256"]
        variants = [("PyTorch", pin, {}), ("PyTorch + pinwheel", pin, shim),
                    ("PyTorch + pinwheel, PINWHEEL_FILL_AHEAD=512M", pin, dict(shim, PINWHEEL_FILL_AHEAD="512M"))]
        print("PyTorch pin_memory() of a 256 MiB tensor, DataLoader(pin_memory=True):", flush=True)
        r = interleave(variants, a.reps, r"pin_memory ([\d.]+) GB/s, pin_memory \+ to\(cuda\) ([\d.]+) GB/s, "
                       r"DataLoader pin_memory ([\d.]+) batches/s, bytes ok", log)
        base = r["PyTorch"]
        table("PyTorch's pinned paths: pin_memory() of a 256 MiB tensor (GB/s, median of %d runs of median-of-7), "
              "DataLoader pin thread (64 MiB batches/s)" % a.reps,
              ["variant", "pin_memory()", "vs without", "pin_memory() + to(cuda)", "DataLoader batches/s",
               "vs without"],
              [[n, f"{med(v, 0):.1f}", f"{med(v, 0) / med(base, 0):.3f} x", f"{med(v, 1):.1f}",
                f"{med(v, 2):.1f}", f"{med(v, 2) / med(base, 2):.3f} x"] for n, v in r.items()])

    # training with real libraries: ms/step, and the final loss, which must be the same bits
    def loss_table(title, r, base_name):
        base = r[base_name]
        table(title, ["variant", "ms/step", "time vs without", "final loss identical in every run"],
              [[n, f"{med(v, 0):.2f}", f"{med(v, 0) / med(base, 0):.3f} x",
                "yes" if all(s[1] == base[0][1] for s in v) else "NO"] for n, v in r.items()])

    if "hf" in only and have(py, "transformers"):
        hf = [py, "samples/hf_finetune.py", "--steps", "40", "--warmup", "10"]
        variants = [("transformers BERT", hf, {}), ("transformers BERT + pinwheel", hf, shim),
                    ("transformers BERT + pinwheel, PINWHEEL_SYNC=keep", hf, keep)]
        print("transformers: BERT (6 layers, from a config) fine-tuning:", flush=True)
        r = interleave(variants, a.reps, r"([\d.]+) ms/step, final loss ([-\d.e+]+)", log)
        loss_table("transformers: BERT, 6 layers, built from a config, fine-tuning (batch 64 x 512), median of %d"
                   % a.reps, r, "transformers BERT")

    if "lightning" in only and have(py, "lightning"):
        lf = [py, "samples/lightning_fit.py", "--steps", "300", "--warmup", "30"]
        variants = [("Lightning", lf, {}), ("Lightning + pinwheel", lf, shim),
                    ("Lightning + pinwheel, PINWHEEL_SYNC=keep", lf, keep)]
        print("Lightning Trainer.fit, DataLoader of 64 MiB batches, small MLP:", flush=True)
        r = interleave(variants, a.reps, r"([\d.]+) ms/step, final loss ([-\d.e+]+)", log)
        loss_table("Lightning Trainer.fit: DataLoader of 64 MiB pageable batches, small MLP, 270 timed steps, "
                   "median of %d" % a.reps, r, "Lightning")

    ngpu = gpu_count() if ("ddp" in only or "aggbw" in only) else 0
    if ("ddp" in only or "aggbw" in only) and ngpu < 2:
        print(f"SKIP ddp, aggbw: {ngpu} GPU here, they need 2 or more", flush=True)

    if "ddp" in only and ngpu >= 2:
        tr = [py, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ngpu}",
              "samples/train_ddp.py", "--iters", "20", "--warmup", "5"]
        loader = tr + ["--loader-workers", "2"]
        variants = [("naive", tr, {}), ("naive + pinwheel", tr, shim),
                    ("prefetcher (hand-written, per rank)", tr + ["--mode", "prefetch"], {}),
                    ("DataLoader, 2 forked workers per rank", loader, {}),
                    ("DataLoader, 2 forked workers per rank + pinwheel", loader, shim)]
        print(f"DDP ResNet-50, {ngpu} ranks, batch 128 per rank:", flush=True)
        r = interleave(variants, a.reps, r"slowest rank ([\d.]+) ms/iter, params agree", log)
        base, pref = med(r["naive"]), med(r["prefetcher (hand-written, per rank)"])
        table("DistributedDataParallel ResNet-50, %d ranks (a rank per GPU), batch 128 per rank, bf16: the "
              "slowest rank's ms/iter, median of %d; the ranks' parameters agreed in every run" % (ngpu, a.reps),
              ["variant", "ms/iter", "throughput vs naive", "throughput vs prefetcher"],
              [[n, f"{med(v):.2f}", f"{base / med(v):.3f} x", f"{pref / med(v):.3f} x"] for n, v in r.items()])

    if "aggbw" in only and ngpu >= 2:
        copies = 20
        cb = [f"{B}/copy_bw", "256", "h2d", str(copies)]
        variants = [("pinned source, CUDA runtime (the DMA's own speed)", cb + ["pinned"], {}),
                    ("pageable, CUDA runtime", cb, {}),
                    ("pageable, pinwheel", cb, shim),
                    ("pageable, pinwheel, PINWHEEL_NUMA=0", cb, dict(shim, PINWHEEL_NUMA="0"))]
        pat = r"median ([\d.]+) GB/s, window ([\d.]+) ([\d.]+), bytes ok"
        rows = []
        print(f"aggregate H2D bandwidth, one process per GPU ({ngpu}):", flush=True)
        agg = {n: [] for n, _, _ in variants}
        for rep in range(a.reps):
            for name, cmd, env in variants:
                per = run_per_gpu(cmd, env, ngpu, pat, log)
                t0, t1 = min(p[1] for p in per), max(p[2] for p in per)
                both = min(p[2] for p in per) - max(p[1] for p in per)
                total = ngpu * copies * 256 * 2**20 / (t1 - t0) / 1e9
                agg[name].append((total, [p[0] for p in per], max(both, 0) / (t1 - t0)))
                print(f"  rep {rep + 1} {name}: {total:.1f} GB/s in all, "
                      f"{', '.join(f'{p[0]:.1f}' for p in per)} each, {100 * agg[name][-1][2]:.0f} % together",
                      flush=True)
        for name, v in agg.items():
            m = sorted(v)[len(v) // 2]
            rows.append([name, f"{m[0]:.1f}", " / ".join(f"{x:.1f}" for x in m[1]), f"{100 * m[2]:.0f} %"])
        table("Aggregate H2D bandwidth, one process per GPU (%d), %d copies of 256 MiB each, started together: "
              "all bytes / the whole window, the run of median aggregate of %d" % (ngpu, copies, a.reps),
              ["source, path", "GB/s in all", "GB/s per process (median copy)", "time all copied together"], rows)

    if "collector" in only:  # the CUPTI collector's cost, per workload class
        tdir = tempfile.mkdtemp(prefix="pwbench-trace-")
        off = {"LD_PRELOAD": lib, "PINWHEEL_MODE": "off"}
        nvtx = os.path.join(B, "libpinwheel_nvtx.so")
        classes = [
            ("ResNet-50 training", [py, "samples/train_naive.py", "--iters", str(a.train_iters)],
             r"([\d.]+) ms/iter"),
            # 100 timed steps (under a second): a long job's steady state weighs more than the first
            # steps; over 30, one session measured +10.6 %, over 100 a later one +4.6 % (RESULTS.md)
            ("copy-bound loop (256 MiB batches)", [py, "samples/train_copybound.py", "--iters", "100", "--mode",
                                                   "naive"], r"([\d.]+) ms/step, loss [-\d.]+, bytes ok"),
            ("D2H-heavy inference", [py, "samples/infer_d2h.py", "--iters", "30", "--mode", "naive"],
             r"([\d.]+) ms/step, checked \d+, bytes ok"),
            ("naive_copy (C, 64 MiB)", [f"{B}/naive_copy", "64", "40", "6"], r"([\d.]+) ms/iter, checksum ok"),
        ]
        rows, sizes, where = [], [], []
        if a.collector_quick:
            classes = classes[:2]
        for title, cmd, pat in classes:
            variants = []
            bases = [("pinwheel", shim)] + ([] if a.collector_quick else [("mode off", off)])
            if title.startswith("copy-bound") and a.collector_chunks:  # CUPTI's cost per DMA: a slope
                bases[1:1] = [("pinwheel 1M chunks", dict(shim, PINWHEEL_CHUNK="1M")),
                              ("pinwheel 16M chunks", dict(shim, PINWHEEL_CHUNK="16M", PINWHEEL_HOST_POOL="192M"))]
            if title.startswith("copy-bound") and a.collector_threads:  # a CPU left to CUPTI's threads
                n = max(1, default_threads(B, shim, tdir) - 1)
                bases[1:1] = [(f"pinwheel {n} staging threads", dict(shim, PINWHEEL_THREADS=str(n)))]
            for base_name, env in bases:
                variants.append((base_name, cmd, env))
                for ext in a.collector_formats.split(","):
                    traced = dict(env, PINWHEEL_TRACE=os.path.join(tdir, f"t.{ext}"))
                    if os.path.exists(nvtx):  # as `pinwheel run --trace` sets it: NVTX ranges too
                        traced["NVTX_INJECTION64_PATH"] = nvtx
                    variants.append((f"{base_name}, traced .{ext}", cmd, traced))
            # pinwheel's own summary of every run (read by after), in copies of the environments
            # (the untraced ones are the dicts other classes use too)
            stats = stats_env(os.path.join(tdir, "stats-%p.json"))
            variants = [(n, c, dict(env, **stats)) for n, c, env in variants]
            written, summaries = {}, {}

            def after(name, env, secs):  # the trace's size, the process's wall time, its summary
                path = env.get("PINWHEEL_TRACE")
                if path and os.path.exists(path):
                    written.setdefault(name, []).append((os.path.getsize(path), secs))
                    os.unlink(path)
                found = []
                for f in os.listdir(tdir):
                    if f.startswith("stats-") and f.endswith(".json"):
                        try:
                            with open(os.path.join(tdir, f)) as fh:
                                found.append(json.load(fh))
                        except (OSError, ValueError):
                            pass
                        os.unlink(os.path.join(tdir, f))
                if found:  # the process that used CUDA (its helpers', if any, intercepted less)
                    summaries.setdefault(name, []).append(max(found, key=lambda j: j.get("intercepted", 0)))

            print(f"collector overhead, {title}:", flush=True)
            r = interleave(variants, a.reps, pat, log, after)
            for n, v in written.items():
                b, secs = statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)
                sizes.append([title, n, f"{b / 2**20:.1f}", f"{secs:.1f}", f"{b / 2**20 / secs * 60:.0f}"])
            for n, v in r.items():
                b = n.split(",")[0]
                if n == b:
                    rows.append([title, n, f"{med(v):.2f}", "", "", "", ""])
                    continue
                # paired within each round (the traced run right after its untraced one): a drift
                # between rounds, which moved whole rounds by up to 30 % on one machine, cancels
                each = [t[0] / u[0] - 1 for t, u in zip(v, r[b])]
                over = statistics.median(each)
                # the best run of each against the other's best: a slow spell of the machine (one
                # session saw whole runs' host copies twice as slow for a minute) only adds time
                best = min(t[0] for t in v) / min(u[0] for u in r[b]) - 1
                rows.append([title, n, f"{med(v):.2f}", f"{100 * over:+.1f} %",
                             ", ".join(f"{100 * x:+.1f}" for x in each), f"{100 * best:+.1f} %",
                             "ok" if over <= 0.03 else "OVER 3 %"])
            where.extend(time_spent(title, summaries))
        shutil.rmtree(tdir, ignore_errors=True)
        table("The collector's overhead: the median over %d interleaved rounds of traced / untraced - 1, "
              "each round's traced run against the untraced run just before it" % a.reps,
              ["workload", "variant", "ms per step (median)", "overhead", "each round (%)", "best / best",
               "<= 3 %"], rows)
        table("The traces' sizes (median of %d; the process's whole run, start-up included)" % a.reps,
              ["workload", "variant", "MiB", "process wall s", "MiB per minute of the process"], sizes)
        table("Where pinwheel's own time went (its summary, ms per process, median of %d; the copies are the "
              "staging threads' summed over threads, the waits are for pinned space to be free again and for "
              "another copy's busy slots)" % a.reps,
              ["workload", "variant", "staging copies", "waits for space (count)", "waits for a slot",
               "host syncs", "busiest hooks"], where)

    if a.md:
        with open(a.md, "w") as f:
            f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
