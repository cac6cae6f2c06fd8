set -u; mkdir -p /tmp/o; OUT0=$OUT; S=$SECONDS
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
if echo "$gpu" | grep -q H200; then
  COMMIT=3d9cafe+ PART=ncu OUT=/tmp/o/ncu bash bench/gpu_s32.sh 2>&1 | tail -40; echo "[ncu done $((SECONDS-S)) s]"
fi
if [ $((SECONDS-S)) -lt 330 ]; then
  VARIANTS="khr:0 nv:0 nv:1 nv:2 nv:4 nv:8 nv:16 nv:32 nv:64 nv:128 nv:256 nv:384 nv:320 nv:512 nv:576 nv:768 nv:832 khr:64 khr:256 khr:576 khr:832 nv:14" OUT=/tmp/o bash bench/spirv_attn_probe.sh 2>&1 | tail -40
fi
if [ $((SECONDS-S)) -lt 480 ]; then COMMIT=3d9cafe+ FULL=0 PART=fsdp OUT=/tmp/o bash bench/gpu_s32.sh 2>&1 | grep -E "checkpoint|small"; fi
tar czf $OUT0/logs.tgz -C /tmp/o .
