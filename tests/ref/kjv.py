"""examples/kjv: a byte-level causal LM (examples/gpt2.mdl, small) trained on
the King James Bible that Debian's bible-kjv reads.  200 steps from the
command line through examples/kjv/train.sh; the held-out loss must fall
from step 100 to step 200 and be under 2.8 nats a byte at step 200
(uniform guessing: ln 256 = 5.55; it was 2.675 when this test was written,
2026-12-02), and the plot must hold both curves.

Usage: kjv.py MLC ROOT WORKDIR"""
import os
import re
import subprocess
import sys

mlc, root, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
subprocess.run(["sh", os.path.join(root, "examples/kjv/train.sh"), mlc, work, "200"], check=True,
               stdout=subprocess.DEVNULL)
val = {int(s): float(v) for s, v in re.findall(r"^step (\d+): validation ([0-9.]+)", open(os.path.join(work, "train.log")).read(), re.M)}
print("validation:", val)
assert sorted(val) == [100, 200], f"validation at steps {sorted(val)}, expected 100 and 200"
assert val[200] < val[100], f"held-out loss did not fall: {val}"
assert val[200] < 2.8, f"held-out loss at step 200 is {val[200]}, expected under 2.8"
svg = open(os.path.join(work, "loss.svg")).read()
assert svg.count("<polyline") == 2 and svg.count("<circle") == 2, "the plot lacks a curve"
print("ok")
