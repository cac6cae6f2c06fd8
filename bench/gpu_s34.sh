#!/usr/bin/env bash
# On the GPU machine (device tool), session 34 (2026-12-07), issue 23: the
# SPIR-V cooperative-matrix attention with its keys a block by head dim, and
# where the MiniLLM's forward and training stand with it.  PARTS (default
# "probe grad fwd train"), each while LIMIT (default 540) - 100 s are left:
#   probe  bench/attention_bf16.mdl's forward, `mlc profile --entry forward
#          --steps 50`, with the driver's register count
#          (MLC_VK_PIPELINE_STATS=1): FORM:KEYS:D:CAUSAL in $VARIANTS (KEYS 0:
#          the default), then PyTorch's SDPA at d 128 and 64;
#   grad   its train step (forward and gradient) with the coop attention and
#          the tiled one (KHR GEMMs), `mlc profile --entry train_step`, the
#          time per op and the attention kernels, and SDPA's forward+backward;
#   fwd    the MiniLLM bf16 forward (bench/minillm_bf16.mdl) with
#          --spirv-coopmat=khr --spirv-attention=coopmat: `mlc profile` by op,
#          `mlc bench`, and eager PyTorch in the same call;
#   train  bench/gpu_s32.sh's spvtrain: the GPT-2-like bf16 model off the
#          tile multiples, 10 steps on cuda and spirv (KHR; both attentions),
#          the largest loss difference from cuda's, and the steps' times.
# Carry build-gpu/{mlc,lib,codegen/cuda/mlc_opcheck,runtime/libmlcrt.a}, .gl,
# .yardstick.  Logs packed into $OUT/logs.tgz; key lines on stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${OUT:-/tmp/mlc-s34}
work=/tmp/s34-work
mkdir -p "$dest" "$work"
limit=${LIMIT:-540}
left() { echo $((limit - SECONDS)); }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "GPU: $gpu; commit ${COMMIT:-?}; $(date -u '+%F %T') UTC"
. tests/gpu/env.sh $work
vk_loader
mlc=build-gpu/mlc
att=bench/attention_bf16.mdl
for p in ${PARTS:-probe grad fwd train}; do
  [ $(left) -gt 100 ] || { echo "$p: skipped (time)"; continue; }
  mkdir -p $work/$p
  case $p in
  probe)
    for v in ${VARIANTS:-khr:0:128:false nv:0:128:false khr:64:128:false khr:0:128:true khr:0:64:false khr:32:64:false khr:64:64:false}; do
      IFS=: read -r f keys d causal <<< "$v"
      l=$work/probe/${f}_${keys}_${d}_${causal}.log
      k=(); [ "$keys" = 0 ] || k=(--spirv-attention-keys=$keys)
      MLC_VK_PIPELINE_STATS=1 timeout 60 $mlc profile $att -D d=$d -D causal=$causal --target spirv --spirv-coopmat=$f \
        --spirv-attention=coopmat "${k[@]}" --entry forward --steps 50 > $l 2>&1
      printf '%-20s %s | %s [%s s]\n' "$v" "$(grep -E '^attention%' $l | awk '{print $5 " ms, " $7}')" \
        "$(grep -E 'pipeline mlc_attention_[0-9a-f]+ ' $l | grep -oE 'Register Count=[0-9]+|Shared Memory Size=[0-9]+' | tr '\n' ' ')" $SECONDS
      grep -E 'rror' $l | head -2
    done
    for sh in 8,16,1024,128 8,16,1024,64; do
      echo "SDPA $sh: $(timeout 60 python3 bench/attention_torch.py --runs 20 --shape $sh 2>&1 | grep -vE '^#|^ |^-|Self' | tr '\n' ' ')"
    done ;;
  grad)
    for a in coopmat tiled; do
      l=$work/grad/$a.log
      MLC_VK_PIPELINE_STATS=1 timeout 90 $mlc profile $att --target spirv --spirv-coopmat=khr --spirv-attention=$a \
        --entry train_step --steps 10 > $l 2>&1
      echo "== grad, attention $a: $(grep -E 'ms per run' $l | head -1)"
      grep -E '^attention' $l | awk '{print "  " $1, $5 " ms", $7}' | head -8
      grep -E 'pipeline mlc_attention_grad' $l | grep -oE 'main[0-9]|Register Count=[0-9]+' | tr '\n' ' '; echo
      grep -E 'rror' $l | head -2
    done
    echo "SDPA: $(timeout 60 python3 bench/attention_torch.py --runs 20 2>&1 | grep -vE '^#|^ |^-|Self' | tr '\n' ' ')" ;;
  fwd)
    l=$work/fwd/minillm
    timeout 120 $mlc profile bench/minillm_bf16.mdl --target spirv --spirv-coopmat=khr --spirv-attention=coopmat \
      --steps 3 > $l.profile.log 2>&1
    echo "== MiniLLM bf16 forward, khr + coop attention: $(grep -E 'ms per run' $l.profile.log | head -1)"
    grep -E '^by op' $l.profile.log | tr ';' '\n' | head -9
    timeout 120 $mlc bench bench/minillm_bf16.mdl --target spirv --spirv-coopmat=khr --spirv-attention=coopmat \
      --runs 10 --warmup 2 > $l.bench.log 2>&1
    echo "mlc bench: $(grep -o 'median [0-9.]* ms, min [0-9.]*' $l.bench.log)"
    timeout 60 python3 bench/spirv_torch.py minillm --runs 10 > $l.torch.log 2>&1
    grep -v '^#' $l.torch.log | tail -2 ;;
  train)
    PART=spvtrain OUT=$work COMMIT=${COMMIT:-?} bash bench/gpu_s32.sh 2>&1 | grep -vE '^\[|^rc='
    for n in cuda spirv_khr spirv_khr_coopattn; do
      echo "$n: $(grep -E '^step' $work/spvtrain/$n.log | tail -3 | tr '\n' ' ' | cut -c1-300)"
    done ;;
  esac
done
tar -C "$work" -czf "$dest/logs.tgz" .
echo "[done $SECONDS s]"
