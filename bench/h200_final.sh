#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200), one call of about 6 minutes at
# the end of a session: the GPU numerics check of main as it stands, and the
# checks of this session's CUDA and SPIR-V changes.
#   1. every CUDA op case against float64 references (the GPU numerics check)
#   2. the small MiniLLM's logits against PyTorch (opcheck.py minillm), and 5
#      train steps of it (tests/gpu/cuda_check.sh's last two parts)
#   3. ONNX: the recorded tests (tests/onnx/replay.py; see bench/h200_onnx.sh
#      for the recording) whose kernels changed: casts, IsNaN, IsInf, Relu on
#      cuda and spirv, and the end-to-end bundles (Debian torch's export of
#      the tiny GPT: logits on cuda; 10 AdamW steps of the .mdl that trains it)
#   4. bench/f32_models.py: the GPT-2-like model and the MLP in f32 against
#      PyTorch eager (issue 20's models, main's GEMM)
# Carry: .gl build-gpu/mlc build-gpu/codegen/cuda/mlc_opcheck build-gpu/lib
# build-gpu/onnx-rec.tgz (rec/ and rec-e2e/).  Logs in $OUT/logs.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-final}
work=/tmp/final
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
vk_loader
gpu_header bench/h200_final.sh $work/env.log
rc=0 t0=$(date +%s)
save() { tar -C $work -czf "$final/logs.tgz" . 2>/dev/null; echo "(at $(( $(date +%s) - t0 )) s)"; }
opcheck=build-gpu/codegen/cuda/mlc_opcheck
echo "## 1. every CUDA op case"
timeout 150 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops \
  > $work/ops.log 2>&1 || rc=1
grep -E "^FAIL|cases passed" $work/ops.log; save
echo "## 2. the small MiniLLM: logits, 5 train steps"
small="vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64"
timeout 60 python3 tests/ops/opcheck.py minillm --target cuda --opcheck $opcheck --model examples/minillm.mdl \
  --work /tmp/mini > $work/minillm.log 2>&1 || rc=1
tail -3 $work/minillm.log
timeout 60 build-gpu/mlc train examples/minillm.mdl --target cuda --steps 5 $small > $work/train_small.log 2>&1 || rc=1
tail -6 $work/train_small.log; save
echo "## 3. ONNX replays"
tar xzf build-gpu/onnx-rec.tgz -C /tmp
timeout 90 python3 tests/onnx/replay.py --mlc build-gpu/mlc --target cuda --bundle /tmp/rec --jobs 16 \
  --filter "cast|isnan|isinf|relu|Relu" > $work/replay-cuda.log 2>&1 || rc=1
tail -1 $work/replay-cuda.log; grep -E "^(FAIL|ERROR)" $work/replay-cuda.log
timeout 60 python3 tests/onnx/replay.py --mlc build-gpu/mlc --target spirv --bundle /tmp/rec --jobs 16 \
  --filter "cast|isnan|isinf|relu|Relu" > $work/replay-spirv.log 2>&1 || rc=1
tail -1 $work/replay-spirv.log; grep -E "^(FAIL|ERROR)" $work/replay-spirv.log
timeout 90 python3 tests/onnx/replay.py --mlc build-gpu/mlc --target cuda --bundle /tmp/rec-e2e --jobs 4 \
  > $work/replay-e2e-cuda.log 2>&1 || rc=1
cat $work/replay-e2e-cuda.log; save
echo "## 4. f32 models against eager"
timeout 200 python3 bench/f32_models.py --mlc build-gpu/mlc --target cuda --out $work/f32 --f32-matmul 3xtf32 \
  > $work/f32_models.log 2>&1 || rc=1
grep -E "^(gpt2like|mlp): " $work/f32_models.log; cp $work/f32/*.json "$final/" 2>/dev/null; save
echo "rc=$rc"
exit $rc
