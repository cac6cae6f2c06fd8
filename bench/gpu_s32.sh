#!/usr/bin/env bash
# On the GPU machine (device tool), session 32 (2026-12-07).
#   PART (a list; default "spvprof", with "ncu" first on an H200):
#   spvprof  issue 23: where the MiniLLM bf16 forward's time goes on SPIR-V
#            (KHR GEMMs; the default attention and --spirv-attention=coopmat):
#            `mlc profile --steps 3`, the top kernels and the time per op kind,
#            then `mlc bench` of the same and eager PyTorch in the same call.
#   spvops   issue 23: the SPIR-V op cases of the cooperative-matrix kernels
#            on NVIDIA's driver (--spirv-attention=coopmat: the forward and the
#            gradient, which has never run there): the NV form of matmul,
#            linear, fused and attention under the Khronos validation layer
#            (Debian 12's 1.3.239, carried in .gl; a message fails a case),
#            the KHR form of attention without it, the KHR matmul under it.
#   spvtrain issue 23: the GPT-2-like model off the tile multiples in bf16
#            (bench/spirv_drift_h200.sh's: precision(param=bf16, reduce=f32),
#            vocab 8003, heads of 64, seq 1000), 10 steps on cuda and on spirv
#            (KHR; both attentions), the same tokens; the largest loss
#            difference from cuda's.
#   fsdp     issue 31: the gradients packed in place (563c921) on the GPU:
#            the small MiniLLM (f32, fsdp_mpi.sh's config) 10 steps on
#            cuda-nccl (one rank) against cuda, losses within 1e-5; a
#            sharded checkpoint on cuda-nccl (4 steps saved, 3 resumed,
#            against 7: the losses, and every file byte for byte); then the
#            full MiniLLM's train step on cuda-nccl, this build against the
#            one before (build-gpu/mlc-old, 936580d), twice each, alternating,
#            median of steps 3..12 (FULL=0 skips this timing).
#   ncu      issue 24: bench/h200_s28.sh (mlc's verdicts against ncu's).
# Carry build-gpu/{mlc,lib,codegen/cuda/mlc_opcheck,runtime/libmlcrt.a},
# .yardstick, .gl.  Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${OUT:-/tmp/mlc-s32}
mkdir -p "$dest"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "GPU: $gpu; commit ${COMMIT:-?}; $(date -u '+%F %T') UTC"
rc=0
part=${PART:-}
[ -n "$part" ] || { if echo "$gpu" | grep -q H200; then part="ncu spvprof"; else part="spvprof"; fi; }
for p in $part; do
  case $p in
  ncu) OUT=$dest/ncu COMMIT=${COMMIT:-?} bash bench/h200_s28.sh || rc=1 ;;
  spvops)
    mkdir -p $dest/spvops
    (. tests/gpu/env.sh /tmp/s32-ops; vk_loader
     ls /usr/share/vulkan/explicit_layer.d/ 2>&1 | head -3
     opc=build-gpu/codegen/cuda/mlc_opcheck
     ops() { # log, validate, form, keyword
       MLC_VK_VALIDATE=$2 timeout 170 python3 tests/ops/opcheck.py ops --target spirv --jobs 12 --opcheck $opc \
         --work /tmp/s32-ops/$1 -k $4 --option=--spirv-coopmat=$3 --option=--spirv-attention=coopmat > $dest/spvops/$1.log 2>&1
       echo "$1 (validate=$2): $(grep -E 'cases passed' $dest/spvops/$1.log | tr '\n' ' ') [$SECONDS s]"
       grep -E '^FAIL' $dest/spvops/$1.log | head -4 | cut -c1-240
       grep -iE 'validation|VUID' $dest/spvops/$1.log | head -3 | cut -c1-240
     }
     ops nv_val_attention 1 nv attention
     ops khr_attention 0 khr attention
     ops nv_val_matmul 1 nv matmul
     ops khr_val_matmul 1 khr matmul
     for kw in linear fused; do # while the call has time (DEADLINE: seconds into it)
       [ $SECONDS -lt ${DEADLINE:-420} ] && ops nv_val_$kw 1 nv $kw
     done) || rc=1 ;;
  spvtrain)
    mkdir -p $dest/spvtrain
    (. tests/gpu/env.sh /tmp/s32-train; vk_loader
     sed 's/^    optimizer = AdamW(lr=lr)/    optimizer = AdamW(lr=lr)\n    precision(param=bf16, reduce=f32)/' bench/gpt2like_f32.mdl > /tmp/gpt2like_bf16.mdl
     python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 8003, 4 * 4 * 1000 * 10 + 1).astype(np.int32).tofile('/tmp/s32-tokens.bin')"
     trn() { # name, target, options...
       local n=$1 t=$2; shift 2
       timeout 150 build-gpu/mlc train /tmp/gpt2like_bf16.mdl --target $t --steps 10 --data /tmp/s32-tokens.bin --data-dtype i32 "$@" \
         > $dest/spvtrain/$n.log 2>&1
       grep -E '^step' $dest/spvtrain/$n.log | sed -E 's/^step [0-9]+: loss ([0-9.]+).*/\1/' > $dest/spvtrain/$n.loss
       echo "$n: $(tr '\n' ' ' < $dest/spvtrain/$n.loss) [$SECONDS s]"
     }
     trn cuda cuda; trn spirv_khr spirv --spirv-coopmat=khr; trn spirv_khr_coopattn spirv --spirv-coopmat=khr --spirv-attention=coopmat
     for n in spirv_khr spirv_khr_coopattn; do
       paste $dest/spvtrain/cuda.loss $dest/spvtrain/$n.loss | awk -v n=$n '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; c++ }
         END { printf "%s: %d steps, largest |loss - cuda| %.2e\n", n, c, m }'
     done) || rc=1 ;;
  fsdp)
    mkdir -p $dest/fsdp
    (. tests/gpu/env.sh /tmp/s32-fsdp; mkdir -p /tmp/s32-fsdp
     python3 -c "import numpy as np; np.random.default_rng(7).integers(0, 256, 40000, dtype=np.int32).tofile('/tmp/s32-tok.i32')"
     cfg="dim=64 layers=2 heads=4 vocab=256 seq=32 compute=f32 batch=4"
     for t in cuda cuda-nccl; do
       timeout 120 build-gpu/mlc train examples/minillm.mdl --target $t $cfg --seed 3 --steps 10 --data /tmp/s32-tok.i32 \
         --data-dtype i32 > $dest/fsdp/small_$t.log 2>&1
       grep -E '^step' $dest/fsdp/small_$t.log | awk '{print $4}' > $dest/fsdp/small_$t.loss
     done
     paste $dest/fsdp/small_cuda.loss $dest/fsdp/small_cuda-nccl.loss | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; c++ }
       END { printf "small MiniLLM f32, cuda-nccl (1 rank, packed in place) against cuda: %d steps, largest |loss diff| %.2e (tolerance 1e-5)\n", c, m }'
     # sharded checkpoints on the GPU (issue 31 item 5; tests/dist/fsdp_checkpoint.sh's steps, one rank):
     # 4 steps saved, 3 resumed and saved, against 7 uninterrupted: the losses, and the shard byte for byte
     ck=(train examples/minillm.mdl --target cuda-nccl $cfg --seed 3 --data /tmp/s32-tok.i32 --data-dtype i32)
     build-gpu/mlc "${ck[@]}" --steps 4 --save /tmp/s32-fsdp/run.ckpt > $dest/fsdp/ck_a.log 2>&1
     build-gpu/mlc "${ck[@]}" --steps 3 --resume /tmp/s32-fsdp/run.ckpt --save /tmp/s32-fsdp/resumed.ckpt > $dest/fsdp/ck_b.log 2>&1
     build-gpu/mlc "${ck[@]}" --steps 7 --save /tmp/s32-fsdp/whole.ckpt > $dest/fsdp/ck_whole.log 2>&1
     cat $dest/fsdp/ck_a.log $dest/fsdp/ck_b.log | grep '^step' | sed 's/ (.*//' > /tmp/s32-fsdp/resumed.txt
     grep '^step' $dest/fsdp/ck_whole.log | sed 's/ (.*//' > /tmp/s32-fsdp/whole.txt
     echo "checkpoint on cuda-nccl: $(wc -l < /tmp/s32-fsdp/whole.txt) losses; resumed $(cmp -s /tmp/s32-fsdp/whole.txt /tmp/s32-fsdp/resumed.txt && echo identical || echo DIFFER); saved files $(for f in /tmp/s32-fsdp/whole.ckpt*; do g=/tmp/s32-fsdp/resumed.ckpt${f#/tmp/s32-fsdp/whole.ckpt}; printf "%s %s; " "${f##*/}" "$(cmp -s $f $g && echo byte-identical || echo DIFFERS)"; done)"
     build-gpu/mlc compile examples/minillm.mdl --target cuda-nccl --stats -o /tmp/s32-fsdp/st 2>&1 | grep -E "packed in place|planned peak" | tail -2
     for r in $([ "${FULL:-1}" = 1 ] && echo 1 2); do # FULL=0: the small checks alone
       for b in mlc-old mlc; do
         l=$dest/fsdp/full_${b}_$r.log
         XDG_CACHE_HOME=/tmp/cache-$b timeout 150 build-gpu/$b train examples/minillm.mdl --target cuda-nccl --steps 12 > $l 2>&1
         echo "round $r $b: $(grep -E '^step' $l | awk 'NR>=3 {gsub(/\(/,"",$5); print $5}' | sort -n | awk '{a[NR]=$1} END {print "median", a[int((NR+1)/2)], "ms of", NR, "steps"}'); losses $(grep -E '^step' $l | awk '{print $4}' | head -4 | tr '\n' ' ') [$SECONDS s]"
       done
     done) || rc=1 ;;
  spvprof)
    mkdir -p $dest/spvprof
    (. tests/gpu/env.sh /tmp/s32-spv; vk_loader
     for attn in default coopmat; do
       a=; [ $attn = default ] || a=--spirv-attention=$attn
       l=$dest/spvprof/minillm_$attn
       timeout 120 build-gpu/mlc profile bench/minillm_bf16.mdl --target spirv --spirv-coopmat=khr $a --steps 3 > $l.profile.log 2>&1
       echo "== attention $attn: $(grep -E 'ms per run' $l.profile.log)"
       grep -E '^by op' $l.profile.log | tr ';' '\n' | head -14
       grep -E '^[a-z_]+%' $l.profile.log | head -14 | cut -c1-120
       timeout 90 build-gpu/mlc bench bench/minillm_bf16.mdl --target spirv --spirv-coopmat=khr $a \
         --runs 10 --warmup 2 > $l.bench.log 2>&1
       echo "bench: $(grep -o 'median [0-9.]* ms, min [0-9.]*' $l.bench.log)"
     done
     timeout 60 python3 bench/spirv_torch.py minillm --runs 10 > $dest/spvprof/minillm_torch.log 2>&1
     grep -v '^#' $dest/spvprof/minillm_torch.log | tail -3) || rc=1 ;;
  esac
  echo "[$SECONDS s]"
done
echo "rc=$rc [$SECONDS s]"
exit $rc
