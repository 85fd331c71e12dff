"""JAX and PyTorch in one process under pinwheel: each framework's copies keep their bytes, and the
summary counts every copy once, whichever front end saw it (the runtime's for PyTorch, the
driver's for JAX).
    python3 tests/gpu/jax_torch.py run     (with PINWHEEL_STATS_FORMAT=json, PINWHEEL_STATS_FILE=S)
    python3 tests/gpu/jax_torch.py --check S
"""
import json
import os
import sys

N, MIB = 5, 64

if sys.argv[1] == "--check":
    # PyTorch hands CUDA its pageable tensors (the runtime front end stages them).  XLA, with its
    # own staging off (pinwheel asks for that in stage mode), hands the driver its pageable numpy
    # arrays too.  Each of the 2 x N copies is counted once.
    s = json.load(open(sys.argv[2]))
    rows = {(r["direction"], r["src"], r["dst"]): r for r in s["copies"]}
    one = N * (MIB << 20)
    pageable = rows.get(("H2D", "pageable", "device"), {"bytes": 0})["bytes"]
    pinned = rows.get(("H2D", "pinned", "device"), {"bytes": 0})["bytes"]
    into = s["staging"]["host_copies_into_pinned"]["bytes"]
    unstaged = s["staging"]["xla_unstaged_clients"]
    rt = sum(v["calls"] for k, v in s["calls"].items() if k.startswith("cudaMemcpy"))
    drv = sum(v["calls"] for k, v in s["calls"].items() if k.startswith("cuMemcpy"))
    print(f"H2D pageable bytes {pageable}, pinned bytes {pinned}, XLA's staging memcpy on pinwheel's "
          f"threads {into} (one framework's: {one}); XLA clients without XLA's staging {unstaged}; "
          f"runtime copy calls {rt}, driver copy calls {drv}")
    print("calls:", {k: v["calls"] for k, v in s["calls"].items() if v["calls"]})
    ok = 2 * one <= pageable <= 2 * one + (1 << 20) and pinned < (1 << 20) and into == 0 and unstaged == 1
    ok = ok and rt >= N and drv >= N
    print("jax+torch summary", "ok" if ok else "WRONG")
    sys.exit(0 if ok else 1)

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

bad = 0
for i in range(N):
    x = torch.randn((MIB << 20) // 4)
    y = x.cuda()
    a = np.random.default_rng(i).standard_normal((MIB << 20) // 4, dtype=np.float32)
    j = jax.device_put(a)
    torch.cuda.synchronize()
    bad += not torch.equal(y.cpu(), x)
    bad += not np.array_equal(np.asarray(j), a)
print("jax+torch bytes", "ok" if not bad else "DIFFER")
sys.exit(1 if bad else 0)
