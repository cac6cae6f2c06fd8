#!/usr/bin/env python3
"""compare_losses.py A.log B.log TOL [--quiet]: every `step N: loss X` of A
against B's, relatively; prints PASS or FAIL with the worst difference and
exits 1 on FAIL (also when the counts differ or there are none).  Used by
bench/fsdp_h200x2.sh and bench/fsdp_gpus.sh."""
import re
import sys

a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
la = [float(x) for x in re.findall(r"^step \d+: loss (\S+)", open(a).read(), re.M)]
lb = [float(x) for x in re.findall(r"^step \d+: loss (\S+)", open(b).read(), re.M)]
worst = max((abs(x - y) / abs(y) for x, y in zip(la, lb)), default=float("inf"))
ok = len(la) == len(lb) > 0 and worst <= tol
if "--quiet" not in sys.argv:
    for i, (x, y) in enumerate(zip(la, lb)):
        print("  step %2d: %.6f  %.6f" % (i + 1, x, y))
print("%s: %d vs %d losses, worst relative difference %.2e (tolerance %g)" % ("PASS" if ok else "FAIL", len(la), len(lb), worst, tol))
sys.exit(0 if ok else 1)
