#!/usr/bin/env bash
# On the GPU machine (device tool): where the MiniLLM bf16 forward's time
# goes, mlc (`mlc profile`, per kernel) beside PyTorch eager (its kernels'
# CUDA times, bench/fwd_torch_prof.py) in one call, and both forwards'
# wall times (mlc bench, torch_baseline.py infer).  Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-fwdprof}
work=/tmp/fwdprof-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=$PWD/build-gpu/mlc
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_fwdprof.sh $work/env.log
timeout 120 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 > $work/bench.log 2>&1 || rc=1
grep -o 'median [0-9.]* ms' $work/bench.log
timeout 120 $mlc profile bench/minillm_bf16.mdl --target cuda --steps 5 > $work/profile.log 2>&1 || rc=1
head -60 $work/profile.log
pack
timeout 200 python3 bench/fwd_torch_prof.py > $work/torch_prof.log 2>&1 || rc=1
head -40 $work/torch_prof.log
timeout 200 python3 .yardstick/torch_baseline.py infer > $work/torch.log 2>&1 || rc=1
cat $work/torch.log
pack
echo "rc=$rc"
exit $rc
