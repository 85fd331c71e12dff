"""Where the host time of `.cpu()` into fresh memory goes, without CUDA: for a tensor of the size
infer_d2h.py moves back (134 MB by default), time torch.empty (the mapping), the first write
(first-touch page faults: the kernel zeroes each page), a second write (touched memory), and the
free (munmap), with the allocator's default pages and with transparent huge pages advised.
    python3 bench/fresh_probe.py [MB] [REPS]"""
import ctypes
import sys
import time

import torch

mb = int(sys.argv[1]) if len(sys.argv) > 1 else 134
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 7
n = mb * 1000 * 1000 // 4
libc = ctypes.CDLL(None, use_errno=True)
MADV_HUGEPAGE = 14


def once(huge):
    t0 = time.perf_counter()
    a = torch.empty(n)
    t1 = time.perf_counter()
    if huge:
        p = a.data_ptr()
        lo = (p + (2 << 20) - 1) & ~((2 << 20) - 1)
        hi = (p + n * 4) & ~((2 << 20) - 1)
        libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), MADV_HUGEPAGE)
    t2 = time.perf_counter()
    a.fill_(1.0)  # torch's CPU threads: faults spread over them
    t3 = time.perf_counter()
    a.fill_(2.0)
    t4 = time.perf_counter()
    del a
    t5 = time.perf_counter()
    return [(t1 - t0) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3, (t5 - t4) * 1e3]


for huge in (False, True):
    rows = sorted((once(huge) for _ in range(reps)), key=lambda r: r[1])
    m = rows[len(rows) // 2]
    print(f"fresh_probe {mb} MB, {'huge pages advised' if huge else '4 KiB pages'}, "
          f"{torch.get_num_threads()} threads: alloc {m[0]:.2f} ms, first write {m[1]:.2f} ms "
          f"({mb / m[1]:.1f} GB/s), second write {m[2]:.2f} ms ({mb / m[2]:.1f} GB/s), "
          f"free {m[3]:.2f} ms", flush=True)
