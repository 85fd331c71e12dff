"""A trace of a capture window (pinwheel run --trace-steps / --trace-capture / --trace-delay) on
the GPU: it holds exactly ITERS of the program's input copies of BYTES (pageable H2D copies, or,
staged, the program's calls pinwheel staged), and `pinwheel report` on it infers ITERS steps.
    python3 tests/gpu/check_window.py PINWHEEL TRACE ITERS BYTES
A pinwheel built without the analyzer (no `report` command: a GPU machine without its libraries)
checks the copies only and says so; the report part is then checked where the analyzer is built,
on the same trace file.
"""
import gzip
import json
import re
import subprocess
import sys

cli, path, iters, nbytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
    ev = json.load(f)["traceEvents"]
x = [e for e in ev if e.get("ph") == "X"]
pageable = [e for e in x if e.get("cat") == "gpu_memcpy" and e["name"].startswith("Memcpy HtoD (Pageable")
            and e.get("args", {}).get("bytes") == nbytes]
staged = {e["args"]["correlation"] for e in x if e.get("args", {}).get("pinwheel_staged")}
# a staged call's bytes: its DMAs (pinned -> device, marked) carry its correlation
dma_bytes = {}
for e in x:
    a = e.get("args", {})
    if e.get("cat") == "gpu_memcpy" and a.get("pinwheel") and a.get("correlation") in staged \
            and e["name"].startswith("Memcpy HtoD (Pinned"):
        dma_bytes[a["correlation"]] = dma_bytes.get(a["correlation"], 0) + a.get("bytes", 0)
staged_inputs = [c for c, b in dma_bytes.items() if b == nbytes]
got = len(pageable) + len(staged_inputs)
rep = subprocess.run([cli, "report", path], capture_output=True, text=True)
# a pinwheel built with PINWHEEL_ANALYZER=OFF says so (older builds: "unknown command 'report'")
no_report = ("built without the analyzer" in rep.stderr or "unknown command 'report'" in rep.stderr)
m = re.search(r"steps inferred: (\d+) iterations", rep.stdout)
said = ("not checked: this pinwheel has no report command" if no_report
        else m.group(0) if m else rep.stdout.splitlines()[1:2] or rep.stderr)
print(f"{path}: {len(x)} events, input copies {got} ({len(pageable)} pageable, {len(staged_inputs)} staged), "
      f"report: {said}")
steps_ok = no_report or (m and int(m.group(1)) == iters)
sys.exit(0 if got == iters and steps_ok else 1)
