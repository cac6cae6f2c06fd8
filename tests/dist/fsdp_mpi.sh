#!/usr/bin/env bash
# FSDP on the CPU under mpirun: the small MiniLLM in fp32, sharded across 2
# and 4 ranks (each rank its own batch of B / world rows), must follow the
# unsharded run on the whole batch B within 1e-5 in every one of 10 AdamW
# steps' losses.  The sharded program packs at least one unit's gradients
# in place (passes/memplan.c: the kernels write them into the flat buffer the
# reduce-scatter reads; no concat), so the check covers that too.
# Usage: fsdp_mpi.sh MLC MODEL.mdl WORKDIR
set -euo pipefail
mlc=$1 model=$2 work=$3
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (Debian openmpi-bin)"; exit 77; }
# Under mpirun the ASan build's leak check is off: Open MPI keeps what
# MPI_Init allocated, partly in plugins it has unloaded by exit, so the
# reports cannot be told from mlc's.  The single-process runs keep it.
nolsan=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
mkdir -p "$work"
cfg=(dim=64 layers=2 heads=4 vocab=256 seq=32 compute=f32)
/usr/bin/python3 -c "
import numpy as np; np.random.default_rng(7).integers(0, 256, 40000, dtype=np.int32).tofile('$work/tokens.i32')"
"$mlc" compile "$model" --target cpu --fsdp "${cfg[@]}" --stats -o "$work/stats" >"$work/stats.log" 2>&1
grep -E "packed in place for their reduce-scatter: [1-9]" "$work/stats.log" ||
  { echo "FAIL: no unit's gradients packed in place"; grep -i packed "$work/stats.log"; exit 1; }
common=(train "$model" --target cpu "${cfg[@]}" --seed 3 --steps 10 --data "$work/tokens.i32" --data-dtype i32 --threads 1)
"$mlc" "${common[@]}" batch=4 >"$work/ref.log"
mpi=("${nolsan[@]}" mpirun --allow-run-as-root --oversubscribe --bind-to none)
"${mpi[@]}" -np 2 "$mlc" "${common[@]}" batch=2 >"$work/np2.log"
"${mpi[@]}" -np 4 "$mlc" "${common[@]}" batch=1 >"$work/np4.log"
/usr/bin/python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
def losses(name):
    v = [float(m.group(1)) for m in re.finditer(r"^step \d+: loss ([0-9.]+)", open(f"{work}/{name}.log").read(), re.M)]
    if len(v) != 10: sys.exit(f"{name}: expected 10 losses, got {len(v)}")
    return v
ref = losses("ref")
bad = 0
for n in ("np2", "np4"):
    got = losses(n)
    worst = max(abs(a - b) for a, b in zip(ref, got))
    print(f"{n}: worst loss difference over 10 steps {worst:.2e} (tolerance 1e-5)")
    bad += worst > 1e-5
print("unsharded:", " ".join(f"{x:.6f}" for x in ref))
sys.exit(1 if bad else 0)
PY
