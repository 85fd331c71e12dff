#!/usr/bin/env python3
"""Draw one staged host-to-device copy from a torch.profiler trace (tests/gpu/timeline_copy.py):
the program's copy call on the host (copy-in, then the stream sync), each DMA chunk on pinwheel's
side stream, and the device-to-device copy out of the ring on the caller's stream.

    python3 bench/timeline_svg.py TRACE.json.gz OUT.svg [N]     (N: which H2D copy, default 2)
"""
import gzip
import json
import sys


def main():
    path, out = sys.argv[1], sys.argv[2]
    which = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    ev = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e.get("name") == "aten::copy_"]
    gpu = [e for e in ev if e.get("cat") == "gpu_memcpy"]
    h2d = [c for c in ops if sum(1 for d in gpu if "HtoD" in d["name"] and c["ts"] <= d["ts"] <= c["ts"] + c["dur"]) > 1]
    c = h2d[which - 1]
    t0, end = c["ts"], c["ts"] + c["dur"]
    sync = min((e["ts"] for e in ev if e.get("name") == "cudaStreamSynchronize" and t0 <= e["ts"] <= end), default=end)
    dmas = [d for d in gpu if "HtoD" in d["name"] and t0 <= d["ts"] <= end]
    d2d = [d for d in gpu if "DtoD" in d["name"] and t0 <= d["ts"] <= end]
    span = max([end] + [d["ts"] + d["dur"] for d in dmas + d2d]) - t0
    W, L, row = 900, 170, 34
    x = lambda t: L + (t - t0) / span * (W - L - 50)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{4 * row + 40}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{4 * row + 40}" fill="white"/>']
    rows = [("host: copy-in (16 threads)", [(t0, sync, "#4c72b0")]),
            ("host: stream sync", [(sync, end, "#bbbbbb")]),
            ("side stream: DMA chunks", [(d["ts"], d["ts"] + d["dur"], "#dd8452" if k % 2 else "#c44e52") for k, d in enumerate(dmas)]),
            ("caller stream: ring -> dst", [(d["ts"], d["ts"] + d["dur"], "#55a868") for d in d2d])]
    for i, (label, bars) in enumerate(rows):
        y = 10 + i * row
        svg.append(f'<text x="5" y="{y + 20}">{label}</text>')
        for a, b, col in bars:
            svg.append(f'<rect x="{x(a):.1f}" y="{y + 6}" width="{max(0.8, x(b) - x(a)):.1f}" height="{row - 12}" fill="{col}"/>')
    yb = 10 + 4 * row
    for k in range(0, int(span / 1000) + 1):
        svg.append(f'<line x1="{x(t0 + k * 1000):.1f}" y1="{yb}" x2="{x(t0 + k * 1000):.1f}" y2="{yb + 5}" stroke="black"/>')
        svg.append(f'<text x="{x(t0 + k * 1000) - 4:.1f}" y="{yb + 18}">{k}</text>')
    svg.append(f'<text x="{W - 30}" y="{yb + 18}">ms</text></svg>')
    open(out, "w").write("\n".join(svg) + "\n")
    busy = sum(d["dur"] for d in dmas)
    print(f"copy-in {(sync - t0) / 1e3:.2f} ms, {len(dmas)} DMA chunks {busy / 1e3:.2f} ms, done after {span / 1e3:.2f} ms -> {out}")


if __name__ == "__main__":
    main()
