"""Times `mlc compile MODEL` (read, parse, lower, shape-check: the whole
frontend, as --time-passes reports it) and fails if the median 'total' of 20
runs is over the limit in milliseconds.  Usage: frontend_time.py MLC MODEL LIMIT_MS"""
import re
import statistics
import subprocess
import sys

mlc, model, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
times = []
for _ in range(20):
    r = subprocess.run([mlc, "compile", model, "--time-passes"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr)
    times.append(float(re.search(r"total\s+([0-9.]+) ms", r.stderr).group(1)))
med = statistics.median(times)
print(f"frontend of {model}: median {med:.3f} ms over 20 runs (limit {limit} ms)")
sys.exit(0 if med <= limit else 1)
