#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200), one call: issue 26's GPU
# part.  The Python binding runs the MiniLLM's forward and train steps from
# torch tensors on the GPU, with no host copy, and its logits match mlc run's
# (bench/python_gpu.py says what is checked and within what).
#
# Before, on the CPU machine: bench/artifact_prep.sh, which compiles
# build-gpu/artifacts/minillm.tgz (examples/minillm.mdl --target cuda at the
# small f32 config in build-gpu/artifacts/config.txt) with this tree's mlc.
# Carry: build-gpu/artifacts, build-gpu/lib (libcjson.so.1, which the
# binding's first load links the archive against), build-gpu/mlc (mlc run,
# the reference; built from the same tree, so that it runs the same
# kernels).  COMMIT=<hash> names the tree in the logs.  Logs in
# $OUT/python-logs.tgz, and the summary in $OUT/python.log.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-python}
work=/tmp/python-h200
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
export LIBRARY_PATH=$PWD/build-gpu/lib:${LIBRARY_PATH:-}
gpu_header bench/h200_python.sh $work/env.log
{ build-gpu/mlc --version; python3 -c 'import torch, numpy; print("torch", torch.__version__, "cuda", torch.version.cuda,
  "numpy", numpy.__version__)'; cc --version | head -1; } 2>&1 | tee -a $work/env.log
rc=0
tar xzf build-gpu/artifacts/minillm.tgz -C $work || rc=1
config=$(cat build-gpu/artifacts/config.txt) || rc=1
if [ $rc = 0 ]; then
  timeout ${LIMIT:-400} python3 bench/python_gpu.py --model $work/minillm --mlc build-gpu/mlc --config "$config" \
    --work $work/run 2>&1 | tee $work/python.log
  rc=${PIPESTATUS[0]}
fi
cp $work/python.log "$final/" 2>/dev/null
tar -C $work -czf "$final/python-logs.tgz" --exclude='*.safetensors' --exclude='*.bin' --exclude=./minillm .
echo "rc=$rc"
exit $rc
