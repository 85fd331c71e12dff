"""Checks sync elision in a stage-mode JSON summary (PINWHEEL_STATS_FORMAT=json).

    check_elide.py SUMMARY --elided [--min N]            syncs were elided (at least N, default 1)
    check_elide.py SUMMARY --kept [REASON[,REASON]] [--min N]
                                                         none elided; when the summary counts kept
                                                         syncs by reason, at least N (default 1) of
                                                         these reasons (any one of them)
    check_elide.py SUMMARY --none                        none elided (PINWHEEL_SYNC=keep)
    ... --never REASON[,REASON]                          also: no sync kept for these reasons

Every form also fails when no host-to-device copy was staged (elision would then prove nothing).
The summary's "sync_kept" ({reason: count}) is read where it is found (in "staging" or at the top);
a summary without it counts 0 kept, and the check says so.  A file of several summaries (one per
line) is read as the one of the process that intercepted the most calls.
"""
import argparse
import json
import sys


def load(path):
    found = []
    with open(path) as f:
        text = f.read()
    try:
        found.append(json.loads(text))
    except ValueError:
        for line in text.splitlines():
            line = line.strip()
            if line:
                try:
                    found.append(json.loads(line))
                except ValueError:
                    pass
    if not found:
        fail(f"no JSON summary in {path}")
    return max(found, key=lambda s: s.get("intercepted", 0) if isinstance(s, dict) else 0)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def kept_of(s):
    """{reason: count} of kept syncs, or None when the summary has none"""
    for where in (s.get("staging", {}), s):
        k = where.get("sync_kept")
        if isinstance(k, dict):
            return {r: int(v.get("calls", 0) if isinstance(v, dict) else v) for r, v in k.items()}
        if isinstance(k, (int, float)):
            return {"(all)": int(k)}
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("summary")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--elided", action="store_true")
    g.add_argument("--kept", nargs="?", const="", default=None, metavar="REASONS")
    g.add_argument("--none", action="store_true")
    ap.add_argument("--min", type=int, default=1)
    ap.add_argument("--never", default="", metavar="REASONS")
    ap.add_argument("--rounds", type=int, default=0, help="the syncs that could be elided (printed)")
    a = ap.parse_args()
    s = load(a.summary)
    st = s.get("staging", {})
    elided = int(st.get("sync_elided", s.get("sync_elided", 0)))
    staged = sum(int(st.get(p, {}).get("calls", 0)) for p in ("ring", "pinned_only"))
    kept = kept_of(s)
    ksum = sum(kept.values()) if kept is not None else 0
    of = f" of {a.rounds} candidate syncs" if a.rounds else ""
    print(f"staged H2D copies {staged}; sync_elided {elided}{of}; "
          + (f"sync_kept {kept} (sum {ksum})" if kept is not None
             else "sync_kept absent from the summary: taken as 0"))
    if staged == 0:
        fail("no host-to-device copy was staged: elision was never possible, the test proves nothing")
    if a.elided:
        if elided < a.min:
            fail(f"{elided} syncs elided, expected at least {a.min}"
                 + (": the fences were never exercised, the test proves nothing" if not elided else ""))
    elif a.none:
        if elided:
            fail(f"{elided} syncs elided with elision off")
    else:
        if elided:
            fail(f"{elided} syncs elided where every sync after a staged copy had to be kept")
        if kept is None:
            print("note: no sync_kept counts in this summary; only 'none elided' was checked")
        else:
            reasons = [r for r in a.kept.split(",") if r]
            n = sum(kept.get(r, 0) for r in reasons) if reasons else ksum
            if n < a.min:
                fail(f"{n} syncs kept for {'/'.join(reasons) or 'any reason'}, expected at least {a.min}")
    never = [r for r in a.never.split(",") if r]
    if never:
        if kept is None:
            fail(f"--never {a.never}: the summary counts no kept syncs by reason")
        n = sum(kept.get(r, 0) for r in never)
        if n:
            fail(f"{n} syncs kept for {'/'.join(never)}, expected none")
    print("ok")


if __name__ == "__main__":
    main()
