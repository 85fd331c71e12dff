"""PyTorch's blocking x.to('cuda') under sync elision: what a correct program may rely on after it.

A blocking .to('cuda') of pageable memory is cudaMemcpyAsync on the current stream, then
cudaStreamSynchronize of it, which pinwheel may let return before the stream is done.  Each round
queues a long matmul chain (about --chain-ms) on the current stream, then copies a fresh 64 MiB
int32 tensor from pageable memory with a blocking .to('cuda'), and at once:
  side     reads the result on another stream (x * 1 under torch.cuda.stream(side)),
  thread   another Python thread reads it on its stream (x.clone()),
  queries  torch.cuda.current_stream().query() and the query() of an event recorded before the
           .to() must be True, and that event's elapsed_time across the chain must be positive;
every result compared with the CPU source bit for bit (torch.equal on int32).  Exits 1 on a
difference; prints "torch_elide: ... ok" and how long the .to() calls took against the chain.

    python3 tests/gpu/torch_elide.py [--rounds 20] [--mib 64] [--chain-ms 40]
"""
import argparse
import queue
import statistics
import sys
import threading
import time

import torch


def fail(msg):
    print("torch_elide: FAILED:", msg, flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--chain-ms", type=float, default=40.0)
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    m = torch.randn(4096, 4096, device=dev) / 64  # products keep about the same scale

    # the chain's length: matmuls of about chain-ms in all
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    b = m
    for _ in range(3):
        b = torch.mm(b, m)
    e0.record()
    for _ in range(10):
        b = torch.mm(b, m)
    e1.record()
    e1.synchronize()
    per = max(e0.elapsed_time(e1) / 10, 0.01)
    chain = max(2, int(a.chain_ms / per + 0.5))
    print(f"torch_elide: {a.rounds} rounds of {a.mib} MiB, a chain of {chain} matmuls "
          f"({chain * per:.1f} ms)", flush=True)

    def busy():
        c = m
        for _ in range(chain):
            c = torch.mm(c, m)
        return c

    n = (a.mib << 20) // 4
    base = torch.randint(0, 2**31 - 1, (n,), dtype=torch.int32, generator=torch.Generator().manual_seed(1))

    def source(r):  # fresh bytes every round, in pageable memory
        return torch.bitwise_xor(base, (r % 100 + 1) * 0x01010101).roll(r * 4099 + 1)

    side = torch.cuda.Stream()
    took = []

    def to_cuda(src):
        t0 = time.perf_counter()
        x = src.to("cuda")
        took.append((time.perf_counter() - t0) * 1e3)
        return x

    # 1. the result read at once on another stream of this thread
    for r in range(a.rounds):
        src = source(r)
        busy()
        x = to_cuda(src)
        with torch.cuda.stream(side):
            y = x * 1
        side.synchronize()
        if not torch.equal(y.cpu(), src):
            fail(f"side stream, round {r}: the bytes read on another stream right after .to('cuda') differ")
    print(f"torch_elide side stream: {a.rounds} rounds ok", flush=True)

    # 2. the result read at once by another thread, on its stream
    todo, done = queue.Queue(), queue.Queue()

    def reader():
        s2 = torch.cuda.Stream()
        while True:
            x = todo.get()
            if x is None:
                return
            with torch.cuda.stream(s2):
                y = x.clone()
            s2.synchronize()
            done.put(y)

    th = threading.Thread(target=reader)
    th.start()
    try:
        for r in range(a.rounds):
            src = source(a.rounds + r)
            busy()
            x = to_cuda(src)
            todo.put(x)
            y = done.get(timeout=120)
            if not torch.equal(y.cpu(), src):
                fail(f"thread, round {r}: the bytes another thread read right after .to('cuda') differ")
    finally:
        todo.put(None)
        th.join()
    print(f"torch_elide thread: {a.rounds} rounds ok", flush=True)

    # 3. the stream and an event recorded before the .to(), queried at once
    for r in range(a.rounds):
        src = source(2 * a.rounds + r)
        before = torch.cuda.Event(enable_timing=True)
        after = torch.cuda.Event(enable_timing=True)
        before.record()
        busy()
        after.record()  # pending while the chain runs
        x = to_cuda(src)
        if not torch.cuda.current_stream().query():
            fail(f"queries, round {r}: current_stream().query() is False right after a blocking .to('cuda')")
        if not after.query():
            fail(f"queries, round {r}: an event recorded before a blocking .to('cuda') is not done after it")
        try:
            ms = before.elapsed_time(after)
        except RuntimeError as e:  # cudaErrorNotReady: the event was not done after all
            fail(f"queries, round {r}: elapsed_time of events recorded before a blocking .to('cuda'): {e}")
        if not ms > 0:
            fail(f"queries, round {r}: elapsed_time across the chain is {ms}")
        if not torch.equal(x.cpu(), src):
            fail(f"queries, round {r}: the copy's bytes differ")
    print(f"torch_elide queries: {a.rounds} rounds ok", flush=True)
    print(f"torch_elide: ok; .to('cuda') took {statistics.median(took):.2f} ms (median; "
          f"min {min(took):.2f}, max {max(took):.2f}) after a {chain * per:.1f} ms chain", flush=True)


if __name__ == "__main__":
    main()
