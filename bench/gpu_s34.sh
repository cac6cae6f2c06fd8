#!/usr/bin/env bash
# On the GPU machine (device tool), session 34 (2026-12-07), issue 23: the
# SPIR-V cooperative-matrix attention with its keys a block by head dim, and
# where the MiniLLM's forward and training stand with it.  PARTS (default
# "probe grad fwd train ops"), each while LIMIT (default 540) - 100 s are left:
#   probe  bench/attention_bf16.mdl's forward, `mlc profile --entry forward
#          --steps 50`, with the driver's register count
#          (MLC_VK_PIPELINE_STATS=1): FORM:KEYS:D:CAUSAL in $VARIANTS (KEYS 0:
#          the default; the first variant again last, as the first runs of a
#          call are slow), then PyTorch's SDPA at d 128 and 64;
#   grad   its train step (forward and gradient) with the coop attention and
#          the tiled one, `mlc profile --entry train_step`, the time per op
#          and the attention kernels, and SDPA's forward+backward;
#   fwd    the MiniLLM bf16 forward (bench/minillm_bf16.mdl) with the
#          defaults (KHR, the coop attention): `mlc profile` by op,
#          `mlc bench`, and eager PyTorch in the same call;
#   train  the GPT-2-like bf16 model off the tile multiples (bench/gpu_s32.sh's
#          spvtrain), 10 steps on cuda, spirv (defaults) and spirv with
#          --spirv-attention=tiled, the same tokens; the largest loss
#          difference from cuda's, and the last steps' times;
#   ops    the op cases on NVIDIA's driver with the defaults (attention,
#          matmul, linear, fused), then attention and matmul with
#          MLC_VK_COOPMAT=nv (the KHR modules' NV fallbacks) under the
#          Khronos validation layer (a message fails a case).
# Carry build-gpu/{mlc,lib,codegen/cuda/mlc_opcheck,runtime/libmlcrt.a}, .gl,
# .yardstick.  Logs packed into $OUT/logs.tgz; key lines on stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/s34-work
gpu_session s34 540
vk_loader
mlc=build-gpu/mlc
att=bench/attention_bf16.mdl
for p in ${PARTS:-probe grad fwd train ops}; do
  [ $(left) -gt 100 ] || { echo "$p: skipped (time)"; continue; }
  mkdir -p $work/$p
  case $p in
  probe)
    # the first runs of a call are slow while the clock rises: one variant first, again at the end
    for v in ${VARIANTS:-khr:0:128:false khr:0:128:false nv:0:128:false nv:64:128:false khr:64:128:false khr:0:128:true khr:64:64:false khr:0:64:false khr:0:128:false}; do
      IFS=: read -r f keys d causal <<< "$v"
      i=$((${i:-0} + 1)); l=$work/probe/$i-${f}_${keys}_${d}_${causal}.log
      k=(); [ "$keys" = 0 ] || k=(--spirv-attention-keys=$keys)
      MLC_VK_PIPELINE_STATS=1 timeout 60 $mlc profile $att -D d=$d -D causal=$causal --target spirv --spirv-coopmat=$f \
        "${k[@]}" --entry forward --steps 50 > $l 2>&1
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
      MLC_VK_PIPELINE_STATS=1 timeout 90 $mlc profile $att --target spirv --spirv-attention=$a \
        --entry train_step --steps 10 > $l 2>&1
      echo "== grad, attention $a: $(grep -E 'ms per run' $l | head -1)"
      grep -E '^attention' $l | awk '{print "  " $1, $5 " ms", $7}' | head -8
      grep -E 'pipeline mlc_attention_grad' $l | grep -oE 'main[0-9]|Register Count=[0-9]+' | tr '\n' ' '; echo
      grep -E 'rror' $l | head -2
    done
    echo "SDPA: $(timeout 60 python3 bench/attention_torch.py --runs 20 2>&1 | grep -vE '^#|^ |^-|Self' | tr '\n' ' ')" ;;
  fwd)
    l=$work/fwd/minillm
    timeout 120 $mlc profile bench/minillm_bf16.mdl --target spirv --steps 3 > $l.profile.log 2>&1
    echo "== MiniLLM bf16 forward, the defaults (KHR, coop attention): $(grep -E 'ms per run' $l.profile.log | head -1)"
    grep -E '^by op' $l.profile.log | tr ';' '\n' | head -9
    timeout 120 $mlc bench bench/minillm_bf16.mdl --target spirv --runs 10 --warmup 2 > $l.bench.log 2>&1
    echo "mlc bench: $(grep -o 'median [0-9.]* ms, min [0-9.]*' $l.bench.log)"
    timeout 60 python3 bench/spirv_torch.py minillm --runs 10 > $l.torch.log 2>&1
    grep -v '^#' $l.torch.log | tail -2 ;;
  train)
    # bench/gpu_s32.sh's spvtrain model and tokens: the GPT-2-like model in bf16 off the tile multiples
    sed 's/^    optimizer = AdamW(lr=lr)/    optimizer = AdamW(lr=lr)\n    precision(param=bf16, reduce=f32)/' bench/gpt2like_f32.mdl > /tmp/gpt2like_bf16.mdl
    python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 8003, 4 * 4 * 1000 * 10 + 1).astype(np.int32).tofile('/tmp/s34-tokens.bin')"
    trn() { # name, target, options...
      local n=$1 t=$2; shift 2
      timeout 150 $mlc train /tmp/gpt2like_bf16.mdl --target $t --steps 10 --data /tmp/s34-tokens.bin --data-dtype i32 "$@" \
        > $work/train/$n.log 2>&1
      grep -E '^step' $work/train/$n.log | sed -E 's/^step [0-9]+: loss ([0-9.]+).*/\1/' > $work/train/$n.loss
      echo "$n: $(tr '\n' ' ' < $work/train/$n.loss) | last steps: $(grep -E '^step' $work/train/$n.log | tail -2 | grep -oE '\([0-9.]+ ms' | tr '\n' ' ') [$SECONDS s]"
      grep -E 'rror' $work/train/$n.log | head -2
    }
    trn cuda cuda; trn spirv spirv; trn spirv_tiled spirv --spirv-attention=tiled
    for n in spirv spirv_tiled; do
      paste $work/train/cuda.loss $work/train/$n.loss | awk -v n=$n '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; c++ }
        END { printf "%s: %d steps, largest |loss - cuda| %.2e\n", n, c, m }'
    done ;;
  ops)
    opc=build-gpu/codegen/cuda/mlc_opcheck
    ops() { # log, validate, MLC_VK_COOPMAT, keyword
      [ $(left) -gt 60 ] || { echo "$1: skipped (time)"; return; }
      MLC_VK_COOPMAT=$3 MLC_VK_VALIDATE=$2 timeout $(( $(left) - 30 < 170 ? $(left) - 30 : 170 )) python3 tests/ops/opcheck.py ops \
        --target spirv --jobs 12 --opcheck $opc --work /tmp/s34-ops/$1 -k $4 > $work/ops/$1.log 2>&1
      echo "$1 (validate=$2, MLC_VK_COOPMAT=$3): $(grep -E 'cases passed' $work/ops/$1.log | tr '\n' ' ') [$SECONDS s]"
      grep -E '^FAIL' $work/ops/$1.log | head -4 | cut -c1-200
      grep -iE 'VUID|validation layer' $work/ops/$1.log | head -3 | cut -c1-240
    }
    # the defaults (KHR modules, the coop attention); then the KHR modules' NV fallbacks under the layer
    ops attention 0 "" attention; ops matmul 0 "" matmul; ops linear 0 "" linear; ops fused 0 "" fused
    ops nv_attention 1 nv attention; ops nv_matmul 1 nv matmul ;;
  causal)
    # why the causal forward takes 3x the full one's time for half its work: a probe build
    # (build-gpu/mlc-probe, bench/results/s34/causal_probe.patch; MLC_ATTN_PROBE bits read while
    # compiling: 1 the loop over every key block, masked (more work, a constant trip count), 2 no
    # causal mask (wrong results), 4 the full attention's loop bound made dynamic); CAUSAL:BITS
    for v in ${CVARIANTS:-true:0 true:0 true:1 true:2 false:0 false:4 true:0}; do
      IFS=: read -r causal pb <<< "$v"
      i=$((${i:-0} + 1)); l=$work/causal/$i-${causal}_$pb.log
      MLC_VK_PIPELINE_STATS=1 MLC_ATTN_PROBE=$pb timeout 60 build-gpu/mlc-probe profile $att -D causal=$causal --target spirv \
        --entry forward --steps 50 > $l 2>&1
      printf 'causal=%-5s probe %s: %s | %s [%s s]\n' $causal $pb "$(grep -E '^attention%' $l | awk '{print $5 " ms, " $7}')" \
        "$(grep -E 'pipeline mlc_attention_[0-9a-f]+ ' $l | grep -oE 'Register Count=[0-9]+' | tr '\n' ' ')" $SECONDS
      grep -E 'rror' $l | head -2
    done ;;
  mltrain)
    # the MiniLLM train step (examples/minillm.mdl: bf16 compute, f32 master weights) on SPIR-V with the
    # defaults, 6 steps, against PyTorch eager's autocast step (.yardstick/torch_baseline.py's train_single)
    python3 -c "import numpy as np; np.random.default_rng(1).integers(0, 32000, 8 * 1024 * 8 + 1, dtype=np.int32).tofile('/tmp/s34-mtok.bin')"
    timeout 240 $mlc train examples/minillm.mdl --target spirv --steps 6 --data /tmp/s34-mtok.bin --data-dtype i32 \
      > $work/mltrain/spirv.log 2>&1
    echo "spirv MiniLLM train: $(grep -E '^step' $work/mltrain/spirv.log | tail -4 | tr '\n' ' ' | cut -c1-400) [$SECONDS s]"
    grep -E 'rror|memory' $work/mltrain/spirv.log | head -3
    (cd .yardstick && timeout 120 python3 -c "import torch_baseline as t; print(t.torch.__version__); t.train_single(False)") \
      > $work/mltrain/torch.log 2>&1
    grep -E 'train_eager' $work/mltrain/torch.log | cut -c1-300 ;;
  warm)
    # the same kernels measured after a long warm-up in the same process (--warmup 1000): the
    # short runs above (50 steps of about 0.5 ms) gave the same kernel 0.35 or 1.7 ms by the
    # order it ran in; first the GEMMs the old way (3 warm-up runs, 30 timed) then warm
    for dt in f16 bf16; do
      for w in "3 30" "1000 1000"; do
        set -- $w; l=$work/warm/gemm_${dt}_$1.log
        timeout 60 $mlc profile bench/gemm_$dt.mdl n=4096 --target spirv --warmup $1 --steps $2 > $l 2>&1
        echo "gemm $dt 4096^3, warmup $1, $2 runs: $(grep -E '^matmul%' $l | awk '{print $5 " ms, " $7}') [$SECONDS s]"
      done
    done
    for v in khr:0:128:false khr:0:128:true khr:64:128:false nv:0:128:false khr:0:64:false; do
      IFS=: read -r f keys d causal <<< "$v"
      l=$work/warm/attn_${f}_${keys}_${d}_${causal}.log
      k=(); [ "$keys" = 0 ] || k=(--spirv-attention-keys=$keys)
      MLC_VK_PIPELINE_STATS=1 timeout 60 $mlc profile $att -D d=$d -D causal=$causal --target spirv --spirv-coopmat=$f \
        "${k[@]}" --entry forward --warmup 1000 --steps 1000 > $l 2>&1
      printf 'attention %-20s %s | %s [%s s]\n' "$v" "$(grep -E '^attention%' $l | awk '{print $5 " ms, " $7}')" \
        "$(grep -E 'pipeline mlc_attention_[0-9a-f]+ ' $l | grep -oE 'Register Count=[0-9]+' | tr '\n' ' ')" $SECONDS
    done
    timeout 120 python3 - <<'PY' 2>&1 | tee $work/warm/torch.log
import torch, torch.nn.functional as F
def t(fn, w=200, n=200):
    for _ in range(w): fn()
    torch.cuda.synchronize(); a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n): fn()
    b.record(); b.synchronize(); return a.elapsed_time(b) / n
for dt in (torch.float16, torch.bfloat16):
    x, y = (torch.randn(4096, 4096, device="cuda", dtype=dt) for _ in range(2))
    print("torch.matmul %s 4096^3: %.4f ms (mean of 200 after 200)" % (dt, t(lambda: x @ y)))
for d, c in ((128, False), (128, True), (64, False)):
    q, k, v = (torch.randn(8, 16, 1024, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    print("SDPA d %d causal %s: %.4f ms" % (d, c, t(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=c))))
PY
    ;;
  gprobe)
    # where the cooperative-matrix GEMM's time goes (bf16 4096^3, KHR): a probe build
    # (build-gpu/mlc-gprobe, bench/results/s34/gemm_probe.patch; MLC_GEMM_PROBE bits read while
    # compiling: 1 no global loads in the loop, 2 no shared stores in the loop, 4 no products,
    # 8 no barriers in the loop, 16 the fragments loaded once a slice, not per 16 of depth;
    # 32 the fragments straight from memory (cooperative loads from the storage buffer, no shared
    # memory); results wrong but for 0 and 32 + 8 + 2 + 1 = 43 at whole tiles); TILE:BITS (TILE "-" the default), after a long warm-up
    for v in ${GVARIANTS:--:0 -:0 -:1 -:2 -:3 -:4 -:8 -:16 -:11 128x128x64x64x32x1:0 128x256x64x64x16x2:0 64x128x32x64x32x2:0 -:0}; do
      IFS=: read -r tile pb <<< "$v"
      i=$((${i:-0} + 1)); l=$work/gprobe/$i-${tile}_$pb.log
      t=(); [ "$tile" = - ] || t=(--spirv-gemm-tile=$tile)
      MLC_VK_PIPELINE_STATS=1 MLC_GEMM_PROBE=$pb timeout 60 build-gpu/mlc-gprobe profile bench/gemm_bf16.mdl n=4096 --target spirv \
        "${t[@]}" --warmup 300 --steps 300 > $l 2>&1
      printf 'gemm tile %-22s probe %-3s %s | %s [%s s]\n' $tile $pb "$(grep -E '^matmul%' $l | awk '{print $5 " ms, " $7}')" \
        "$(grep -E 'pipeline mlc_matmul_[0-9a-f]+ ' $l | grep -oE 'Register Count=[0-9]+|Shared Memory Size=[0-9]+' | tr '\n' ' ')" $SECONDS
      grep -E 'rror' $l | head -2
    done ;;
  ptile)
    # (ran at f729c04, since taken out: 3-30x slower) producer subgroups (--spirv-gemm-tile=...xSTAGESxPRODUCERS): subgroups that only stage the next
    # slice while the others multiply, one barrier a slice; bf16 and f16 4096^3 after a long warm-up,
    # then the matmul and linear op cases with PCHECK's tile
    for dt in bf16 f16; do
      for t in ${PTILES:-- 128x128x64x64x32x1 128x128x64x64x32x2x1 128x128x64x64x32x2x2 128x128x64x64x32x2x4 128x128x64x64x16x2x2 128x256x64x64x16x2x1 128x256x64x64x16x2x2 64x128x32x64x32x2x2 -}; do
        l=$work/ptile/${dt}_$t.log; a=(); [ "$t" = - ] || a=(--spirv-gemm-tile=$t)
        MLC_VK_PIPELINE_STATS=1 timeout 60 $mlc profile bench/gemm_$dt.mdl n=4096 --target spirv "${a[@]}" --warmup 300 --steps 300 > $l 2>&1
        printf 'gemm %s %-24s %s | %s [%s s]\n' $dt $t "$(grep -E '^matmul%' $l | awk '{print $5 " ms, " $7}')" \
          "$(grep -E 'pipeline mlc_matmul_[0-9a-f]+ ' $l | grep -oE 'Register Count=[0-9]+|Shared Memory Size=[0-9]+' | tr '\n' ' ')" $SECONDS
        grep -E 'rror' $l | head -2
      done
    done
    for kw in matmul linear fused; do
      timeout 120 python3 tests/ops/opcheck.py ops --target spirv --jobs 12 --opcheck build-gpu/codegen/cuda/mlc_opcheck \
        --work /tmp/s34-pt/$kw -k $kw --option=--spirv-gemm-tile=${PCHECK:-128x128x64x64x32x2x2} > $work/ptile/ops_$kw.log 2>&1
      echo "$kw with ${PCHECK:-128x128x64x64x32x2x2}: $(grep -E 'cases passed' $work/ptile/ops_$kw.log) [$SECONDS s]"
      grep -E '^FAIL' $work/ptile/ops_$kw.log | head -3 | cut -c1-200
    done ;;
  vsh)
    # the gradient's V (dispatch 1; dO in dispatch 2) kept in shared memory instead of registers: a probe
    # build (build-gpu/mlc-vprobe, mlc_opcheck-vprobe; bench/results/s34/grad_vsh_probe.patch;
    # MLC_GRAD_VSH set while compiling), bench/attention_bf16.mdl's train step after a warm-up, then
    # the attention op cases with it
    for v in base vsh base vsh; do
      l=$work/vsh/$v-$((${i:-0})).log; i=$((${i:-0} + 1))
      e=(); [ $v = vsh ] && e=(MLC_GRAD_VSH=1)
      env "${e[@]}" MLC_VK_PIPELINE_STATS=1 timeout 90 build-gpu/mlc-vprobe profile $att --target spirv --entry train_step \
        --warmup 100 --steps 100 > $l 2>&1
      echo "$v: $(grep -E '^attention_grad' $l | awk '{print $5 " ms, " $7}') | $(grep -E 'pipeline mlc_attention_grad' $l | grep -oE 'main[0-9]|Register Count=[0-9]+' | tr '\n' ' ') [$SECONDS s]"
      grep -E 'rror' $l | head -2
    done
    MLC_GRAD_VSH=1 timeout 150 python3 tests/ops/opcheck.py ops --target spirv --jobs 12 --opcheck build-gpu/mlc_opcheck-vprobe \
      --work /tmp/s34-vsh -k attention > $work/vsh/ops.log 2>&1
    echo "attention op cases with MLC_GRAD_VSH set: $(grep -E 'cases passed' $work/vsh/ops.log) [$SECONDS s]"
    grep -E '^FAIL' $work/vsh/ops.log | head -3 | cut -c1-200 ;;
  esac
done
tar -C "$work" -czf "$dest/logs.tgz" .
echo "[done $SECONDS s]"
