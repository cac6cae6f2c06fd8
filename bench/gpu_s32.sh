#!/usr/bin/env bash
# On the GPU machine (device tool), session 32 (2026-12-07).
#   PART (a list; default "spvprof", with "ncu" first on an H200):
#   spvprof  issue 23: where the MiniLLM bf16 forward's time goes on SPIR-V
#            (KHR GEMMs; the default attention and --spirv-attention=coopmat):
#            `mlc profile --steps 3`, the top kernels and the time per op kind,
#            then `mlc bench` of the same and eager PyTorch in the same call.
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
by_kind() { # the profile's rows summed per op kind (the name before %), largest first
  awk '$1 ~ /%/ && $4 ~ /^[0-9.]+$/ { split($1, a, "%"); t[a[1]] += $4; n[a[1]] += $3 }
       END { for (k in t) printf "  %-14s %4d calls %9.3f ms\n", k, n[k], t[k] }' "$1" | sort -k4 -n -r | head -14
}
for p in $part; do
  case $p in
  ncu) OUT=$dest/ncu COMMIT=${COMMIT:-?} bash bench/h200_s28.sh || rc=1 ;;
  spvprof)
    mkdir -p $dest/spvprof
    (. tests/gpu/env.sh /tmp/s32-spv; vk_loader
     for attn in default coopmat; do
       a=; [ $attn = default ] || a=--spirv-attention=$attn
       l=$dest/spvprof/minillm_$attn
       timeout 120 build-gpu/mlc profile bench/minillm_bf16.mdl --target spirv --spirv-coopmat=khr $a --steps 3 > $l.profile.log 2>&1
       echo "== attention $attn: $(grep -E 'ms per run' $l.profile.log)"
       by_kind $l.profile.log
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
