#!/usr/bin/env python3
"""Analyzer speed and memory on a generated Kineto-like trace (a benchmark, not a test).

    python3 bench/analyzer_bench.py --cli build/pinwheel [--mb 1024] [--keep PATH]

Writes a torch.profiler-shaped Chrome trace of about --mb MB (kernels, memcpys, memsets, runtime
calls, CPU ops with nested args, ProfilerStep annotations on the CPU and the GPU side), then times `pinwheel report --format
json` on it and reports MB/s of uncompressed JSON on one core and peak RSS as a fraction of the
file size.  Targets (issue): >= 150 MB/s, RSS <= 0.5 x for traces >= 100 MB.
"""
import argparse
import os
import resource
import subprocess
import time


def generate(path, mb):
    target = mb * 1000 * 1000
    cpu = ('{"ph":"X","cat":"cpu_op","name":"aten::convolution","pid":1650,"tid":1650,"ts":%d.%03d,"dur":12.5,'
           '"args":{"External id":%d,"Record function id":0,"Sequence number":%d,"Fwd thread id":1,"Ev Idx":%d,'
           '"Input Dims":[[256,64,56,56],[64,64,3,3],[],[],[],[],[]],"Input type":["c10::BFloat16","c10::BFloat16"]}},\n')
    rt = ('{"ph":"X","cat":"cuda_runtime","name":"%s","pid":1650,"tid":1650,"ts":%d.%03d,"dur":4.2,'
          '"args":{"External id":%d,"cbid":211,"correlation":%d}},\n')
    ker = ('{"ph":"X","cat":"kernel","name":"void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_nn_align8>(Params)",'
           '"pid":0,"tid":7,"ts":%d.%03d,"dur":%d.%03d,"args":{"External id":%d,"queued":0,"device":0,"context":1,'
           '"stream":7,"correlation":%d,"registers per thread":96,"shared memory":16384,"blocks per SM":1.9,'
           '"warps per SM":7.8,"grid":[64,4,1],"block":[128,1,1],"est. achieved occupancy %%":12}},\n')
    mc = ('{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":9,"ts":%d.%03d,'
          '"dur":%d.000,"args":{"External id":%d,"device":0,"context":1,"stream":9,"correlation":%d,"bytes":9633792,'
          '"memory bandwidth (GB/s)":8.7}},\n')
    n = 0
    with open(path, "w") as f:
        f.write('{"schemaVersion":1,"deviceProperties":[{"id":0,"name":"NVIDIA H200"}],"traceEvents":[\n')
        ts = 5169126442000000  # ns
        corr = 0
        step = 0
        while f.tell() < target:
            f.write('{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1650,"tid":1650,"ts":%d.%03d,"dur":10000},\n'
                    % (step, ts // 1000, ts % 1000))
            f.write('{"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#%d","pid":0,"tid":7,"ts":%d.%03d,"dur":10000},\n'
                    % (step, ts // 1000, ts % 1000))
            for i in range(400):
                corr += 1
                f.write(cpu % (ts // 1000, ts % 1000, corr, corr, corr))
                f.write(rt % ("cudaLaunchKernel" if i % 50 else "cudaMemcpyAsync", ts // 1000, ts % 1000, corr, corr))
                if i % 50:
                    f.write(ker % ((ts + 5000) // 1000, (ts + 5000) % 1000, 20, 125, corr, corr))
                else:
                    f.write(mc % ((ts + 5000) // 1000, (ts + 5000) % 1000, 1100, corr, corr))
                ts += 25000
                n += 3
            step += 1
        f.write('{"ph":"M","name":"process_name","pid":0,"args":{"name":"GPU 0"}}\n],"traceName":"generated"}\n')
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default="build/pinwheel")
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--keep", default=None, help="path of the generated trace (kept)")
    a = ap.parse_args()
    path = a.keep or "/tmp/pinwheel-bench-trace.json"
    t0 = time.time()
    n = generate(path, a.mb)
    size = os.path.getsize(path)
    print(f"generated {size / 1e6:.0f} MB, {n} events in {time.time() - t0:.1f} s")
    runs = []
    for _ in range(3):
        t0 = time.time()
        p = subprocess.run([a.cli, "report", "--format", "json", path], capture_output=True)
        runs.append(time.time() - t0)
        if p.returncode:
            raise SystemExit(p.stderr.decode())
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    best = sorted(runs)[1]
    print(f"pinwheel report: median {best:.2f} s of 3 -> {size / 1e6 / best:.0f} MB/s; peak RSS {rss / 1e6:.0f} MB "
          f"= {rss / size:.3f} x the trace")
    if not a.keep:
        os.unlink(path)


if __name__ == "__main__":
    main()
