#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200), one call: issue 25's GPU
# part.  A CUDA artifact built on the CPU machine and moved here builds with
# this machine's CMake and runs.
#
# Before, on the CPU machine: bench/artifact_prep.sh, which writes
# build-gpu/artifacts/mlp.tgz (examples/mlp.mdl --target cuda).  Carry:
# build-gpu/artifacts, build-gpu/lib (libcjson.so.1: this machine has no
# Debian packages).  COMMIT=<hash> names the tree in the logs.
#
# What it does (tests/ref/artifact_check.py, the CI test ref.artifact.mlp
# with options for this machine):
#   - unpacks the folder to a fresh path under /tmp, as it came;
#   - copies libcjson.so.1 to /tmp (standing in for Debian's libcjson1), and
#     renames the repository away (".hidden") while the apps are built and
#     run, so that nothing reaches into the source tree (if the rename is
#     refused, a mount point, it says so; the folder's .h, .cmake and .pc are
#     checked to name no tree either way);
#   - builds examples/app (C) and examples/app_cpp (C++) with this machine's
#     CMake, app.c with pkg-config where there is one, and with one cc line;
#   - runs each on the H200: PyTorch's MLP weights (seed 1), a forward, one
#     SGD step, a forward again; compares the logits, the loss and the logits
#     after the step with PyTorch's (on the CPU, f32): relative error at most
#     1e-4 each (the artifact's f32 GEMMs are 3xTF32 on the tensor cores).
# Logs in $OUT/artifact-logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
final=${OUT:-/tmp/mlc-artifact}
work=/tmp/artifact-h200
rm -rf $work && mkdir -p $work/carried $work/lib "$final"
. tests/gpu/env.sh $work
gpu_header bench/h200_artifact.sh $work/env.log
{ cmake --version | head -1; cc --version | head -1; echo "ninja: $(command -v ninja || echo none)";
  echo "pkg-config: $(command -v pkg-config || echo none)"; python3 -c 'import torch; print("torch", torch.__version__)'
} 2>&1 | tee -a $work/env.log
save() { tar -C $work -czf "$final/artifact-logs.tgz" --exclude=./check --exclude=./carried --exclude=./lib .; }
rc=0
tar xzf build-gpu/artifacts/mlp.tgz -C $work/carried && ls -la $work/carried/mlp | tee -a $work/env.log || rc=1
cp build-gpu/lib/libcjson.so.1 $work/lib/ || rc=1
if [ $rc = 0 ]; then
  timeout ${LIMIT:-400} python3 tests/ref/artifact_check.py - "$root" $work/check --model=$work/carried/mlp \
    --target=cuda --lib-dir=$work/lib --hide > $work/check.log 2>&1 || rc=1
fi
# A kill (timeout) leaves no chance to rename the tree back in Python: here then.
if [ -d "$root.hidden" ] && [ ! -e "$root" ]; then mv "$root.hidden" "$root"; echo "renamed the tree back"; fi
cd "$root"
cat $work/check.log
save
echo "rc=$rc"
exit $rc
