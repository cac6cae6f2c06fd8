#!/usr/bin/env bash
# On the GPU machine (device tool), session 28: issue 24's agreement with
# Nsight Compute after three changes (the rule's compute peaks per clock at
# the SM clock measured under load, mlc's side of a kernel summed over its
# steps, the L2 flushed before each timed kernel as ncu does).
#   PART=minillm  mlc calibrate --target cuda (when this machine has no
#                 calibration yet), then the 2-layer MiniLLM train step
#                 (bf16) under `mlc profile --ncu` (mlc cold, as ncu); then
#                 the same ncu CSV against mlc's warm timings (--flush-l2=no)
#   PART=gpt2     the same for the 2-layer GPT-2-like f32 model (3xTF32)
#   PART is a list; the default "minillm gpt2".  (PART=probe ran de28231's
#   clock probe, since removed: call 1 of session 28.)
# Carry build-gpu/mlc, build-gpu/lib.  Logs in $OUT/logs.tgz; a summary on
# standard output.
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${OUT:-/tmp/mlc-s28}
final=/tmp/s28-work # the logs, packed into $OUT/logs.tgz at the end
mkdir -p "$final" "$dest"
. tests/gpu/env.sh "$final"
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/* 2>/dev/null | head -1)
mlc=build-gpu/mlc
rc=0
pack() { tar -C "$final" -czf "$dest/logs.tgz" .; }
calibrate() {
  [ -s /tmp/mlc-cache/mlc/ceilings-cuda.json ] && { echo "calibration: cached"; return; }
  { echo "# bench/h200_s28.sh, $(date -u '+%F %T') UTC, commit ${COMMIT:-?}"
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; ncu --version | tail -1
    timeout ${LIMIT_CAL:-260} $mlc calibrate --target cuda; } > "$final/calibrate.log" 2>&1 || rc=1
  tail -9 "$final/calibrate.log"
}
# $1: name, $2: model, $3...: its config; cold (under ncu) then warm against the same CSV
compare() {
  local name=$1 model=$2 tmp=$final/tmp-$1
  shift 2
  mkdir -p "$tmp"
  TMPDIR=$tmp timeout ${LIMIT_NCU:-230} $mlc profile $model --target cuda --entry train_step --steps 2 --ncu \
    --ncu-json "$final/${name}_cold.json" "$@" > "$final/${name}_cold.md" 2>&1 || rc=1
  echo "== $name, mlc cold (L2 flushed), as ncu:"; grep -E "^agreement|SM clock measured" "$final/${name}_cold.md" | tail -2
  local csv
  csv=$(ls "$tmp"/mlc-ncu-*.csv 2>/dev/null | head -1)
  if [ -n "$csv" ]; then
    cp "$csv" "$final/${name}_ncu.csv"
    timeout 90 $mlc profile $model --target cuda --entry train_step --steps 2 --ncu-csv "$csv" --flush-l2=no \
      --ncu-json "$final/${name}_warm.json" "$@" > "$final/${name}_warm.md" 2>&1 || rc=1
    echo "== $name, mlc warm (in the step):"; grep -E "^agreement" "$final/${name}_warm.md" | tail -1
  fi
  grep -E "DISAGREE" "$final/${name}_cold.md" | cut -c1-170
  pack
}
for part in ${PART:-minillm gpt2}; do
case $part in
minillm) calibrate; compare minillm_l2 examples/minillm.mdl layers=2 batch=2 ;;
gpt2) calibrate; compare gpt2like_l2 bench/gpt2like_f32.mdl layers=2 ;;
esac
done
echo "rc=$rc"
exit $rc
