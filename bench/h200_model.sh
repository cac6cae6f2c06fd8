#!/usr/bin/env bash
# On the GPU machine (device tool), one short call on the MiniLLM:
#   1. bench/cuda_minillm.py --small: logits, gradients (each within
#      max(5e-2, 1.5 x PyTorch bf16's error) of the f32 model's) and the AdamW
#      step against PyTorch;
#   2. the full bf16 forward (mlc bench) beside PyTorch eager
#      (torch_baseline.py infer) in the same call;
#   3. 12 train steps of examples/minillm.mdl (the step time), and with
#      TRAIN_REF=1 torch_baseline.py train (eager and torch.compile) after it.
# PARTS="3" runs only the parts named.
# Needs build-gpu/ and .yardstick/. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-model}
work=/tmp/model-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_model.sh $work/env.log
has() { case " ${PARTS:-1 2 3} " in *" $1 "*) return 0;; esac; return 1; }
if has 1; then
echo "## 1. small MiniLLM against PyTorch"
timeout 150 python3 bench/cuda_minillm.py --small --mlc $mlc --opcheck $opcheck --work /tmp/small > $work/minillm_small.log 2>&1 || rc=1
grep -E "^ok|^FAIL|checks" $work/minillm_small.log | tail -15
pack
fi
if has 2; then
echo "## 2. forward, bf16"
timeout 120 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 > $work/forward.log 2>&1 || rc=1
grep median $work/forward.log
timeout 150 python3 .yardstick/torch_baseline.py infer > $work/torch_infer.log 2>&1 || rc=1
grep -iE "ms" $work/torch_infer.log | tail -4
pack
fi
if has 3; then
echo "## 3. train step"
python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
timeout 150 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32 > $work/train.log 2>&1 || rc=1
grep -E "^step (1|12):" $work/train.log
if [ -n "${TRAIN_REF:-}" ]; then
  timeout 280 python3 .yardstick/torch_baseline.py train > $work/torch_train.log 2>&1 || rc=1
  grep -E "^\{" $work/torch_train.log
fi
pack
fi
echo "rc=$rc"
exit $rc
