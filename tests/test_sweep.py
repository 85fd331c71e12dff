"""bench/sweep.py: each variant's median and its rounds in the table, interleaved; a variant whose
every run failed (no match, or a non-zero exit) is reported as failed, the first one included,
without a traceback and without hiding the others (it once took the table's width from the first
variant and raised IndexError there)."""
import os
import subprocess
import sys

sweep = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "sweep.py")
cmd = "sh -c 'test -n \"$V\" || exit 3; echo \"$V ms/step $R\"'"
p = subprocess.run([sys.executable, sweep, "--reps", "3", "--pattern", r"([\d.]+) ms/step",
                    "--cmd", cmd, "--variant", "none:V=", "--variant", "a:V=2.5",
                    "--variant", "b:V=7 R=x"], capture_output=True, text=True, timeout=60)
out = p.stdout + p.stderr
fails = 0


def check(what, ok):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok


check("exit 0", p.returncode == 0)
check("no traceback", "Traceback" not in out)
check("the failing variant reported", "| none | failed |" in out and out.count("none: failed (3)") == 3)
check("a's median and rounds", "| a | 2.50 | 2.50, 2.50, 2.50 |" in out)
check("b's median and rounds", "| b | 7.00 | 7.00, 7.00, 7.00 |" in out)
check("the header", "| variant | value 1 | rounds of value 1 |" in out)
if fails:
    print(out)
sys.exit(1 if fails else 0)
