#!/usr/bin/env bash
# Sharded checkpoints under mpirun: 2 ranks train 4 steps and save (each rank
# its shard, rank 0 the manifest last); resuming for 3 more steps must give
# exactly the losses of an uninterrupted 7-step run, and its shards saved
# then must be byte for byte the uninterrupted run's.  One rank then gathers
# the shards into safetensors with PyTorch's names (--export), which must
# hold every state_dict key and agree with unsharded training on the whole
# batch within 1e-4 (fp32; the sums over ranks round differently).
# Usage: fsdp_checkpoint.sh MLC MODEL.mdl WORKDIR
set -euo pipefail
mlc=$1 model=$2 work=$3
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (Debian openmpi-bin)"; exit 77; }
# Under mpirun the ASan build's leak check is off: Open MPI keeps what
# MPI_Init allocated, partly in plugins it has unloaded by exit, so the
# reports cannot be told from mlc's.  The single-process runs keep it.
nolsan=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
rm -rf "$work" && mkdir -p "$work"
cfg=(dim=64 layers=2 heads=4 vocab=256 seq=32 compute=f32)
/usr/bin/python3 -c "
import numpy as np; np.random.default_rng(7).integers(0, 256, 40000, dtype=np.int32).tofile('$work/tokens.i32')"
common=(train "$model" --target cpu "${cfg[@]}" --seed 3 --data "$work/tokens.i32" --data-dtype i32 --threads 1)
mpi=("${nolsan[@]}" mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)
"${mpi[@]}" "$mlc" "${common[@]}" batch=2 --steps 4 --save "$work/run.ckpt" >"$work/a.log"
"${mpi[@]}" "$mlc" "${common[@]}" batch=2 --steps 3 --resume "$work/run.ckpt" --save "$work/resumed.ckpt" >"$work/b.log"
"${mpi[@]}" "$mlc" "${common[@]}" batch=2 --steps 7 --save "$work/whole.ckpt" >"$work/whole.log"
cat "$work/a.log" "$work/b.log" | grep '^step' | sed 's/ (.*//' >"$work/resumed.txt"
grep '^step' "$work/whole.log" | sed 's/ (.*//' >"$work/whole.txt"
if ! diff "$work/whole.txt" "$work/resumed.txt"; then echo "FAIL: resumed losses differ from the uninterrupted run"; exit 1; fi
echo "resume: 7 losses identical to the uninterrupted run"
for r in 0 1; do
  cmp "$work/whole.ckpt.rank$r" "$work/resumed.ckpt.rank$r" || { echo "FAIL: rank $r's shard after 4 + 3 steps differs from 7 steps' shard"; exit 1; }
done
echo "resume: both ranks' shards after 4 + 3 steps byte-identical to the uninterrupted 7 steps' shards"
for r in 0 1; do [ -s "$work/run.ckpt.rank$r" ] || { echo "FAIL: no shard of rank $r"; exit 1; }; done
"$mlc" "${common[@]}" --fsdp batch=2 --steps 0 --resume "$work/run.ckpt" --export "$work/gathered.safetensors" >/dev/null
"$mlc" "${common[@]}" batch=4 --steps 4 --export "$work/unsharded.safetensors" >/dev/null
/usr/bin/python3 - "$work" <<'PY'
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32).reshape(v["shape"])
            for k, v in h.items() if k != "__metadata__"}
w = sys.argv[1]
g, u = load(f"{w}/gathered.safetensors"), load(f"{w}/unsharded.safetensors")
if sorted(g) != sorted(u): sys.exit(f"FAIL: names differ: {sorted(set(g) ^ set(u))}")
worst = max(float(np.abs(g[k] - u[k]).max()) for k in g)
print(f"export: {len(g)} tensors with PyTorch's names; worst difference from unsharded training {worst:.2e} (tolerance 1e-4)")
sys.exit(0 if worst <= 1e-4 else 1)
PY
