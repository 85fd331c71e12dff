"""Checks of a multi-rank job's files (tests/gpu/run.sh, two GPUs or more).

    ddp_check.py summaries DIR N   DIR holds exactly N JSON summaries (PINWHEEL_STATS_FILE with %p:
                                   one per rank, none from the launcher or a DataLoader worker,
                                   which never use CUDA), each with staged copies and the staging
                                   threads of a rank sharing the machine with N-1 others
    ddp_check.py traces DIR N      DIR holds exactly rank0.json.gz .. rank{N-1}.json.gz and nothing
                                   else; each is complete JSON, its kernels ran on one device, a
                                   different one per rank, and NCCL's kernels are among them
Exit status 1, with the reason, when a check fails.
"""
import gzip
import json
import os
import sys


def fail(msg):
    print(f"FAILED: {msg}")
    sys.exit(1)


def cpus():
    """The CPUs this process may use, as the shim counts them: affinity, then a cgroup v2 limit."""
    n = len(os.sched_getaffinity(0))
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()
        if quota != "max":
            n = min(n, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return n


def summaries(d, n):
    files = sorted(os.listdir(d))
    if len(files) != n:
        fail(f"{len(files)} summaries for {n} ranks: {files}")
    want = min(16, max(1, cpus() // n))
    for f in files:
        s = json.load(open(os.path.join(d, f)))
        st = s.get("staging", {})
        staged = sum(st.get(p, {}).get("calls", 0) for p in ("ring", "pinned_only"))
        if staged == 0:
            fail(f"{f}: nothing staged")
        if st.get("threads") != want:
            fail(f"{f}: {st.get('threads')} staging threads, {want} expected for {n} ranks on {cpus()} CPUs")
        print(f"{f}: {staged} copies staged, {st['threads']} threads")


def traces(d, n):
    files = sorted(os.listdir(d))
    want = [f"rank{i}.json.gz" for i in range(n)]
    if files != want:
        fail(f"files {files}, expected {want}")
    seen = []
    for f in files:
        ev = json.load(gzip.open(os.path.join(d, f)))["traceEvents"]
        kern = [e for e in ev if e.get("cat") == "kernel"]
        devs = {e["args"]["device"] for e in kern}
        nccl = sum("nccl" in e["name"].lower() for e in kern)
        if len(devs) != 1:
            fail(f"{f}: kernels on devices {sorted(devs)}, expected one")
        if not nccl:
            fail(f"{f}: no NCCL kernel among {len(kern)}")
        seen.append(devs.pop())
        print(f"{f}: {len(ev)} events, {len(kern)} kernels ({nccl} NCCL) on device {seen[-1]}")
    if len(set(seen)) != n:
        fail(f"the ranks' kernels ran on devices {seen}")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("summaries", "traces"):
        sys.exit(__doc__)
    {"summaries": summaries, "traces": traces}[sys.argv[1]](sys.argv[2], int(sys.argv[3]))
