#!/usr/bin/env bash
# Here, on the CPU machine (no GPU; nvcc in /usr/local/cuda), before the GPU
# scripts bench/h200_artifact.sh (issue 25) and bench/h200_python.sh (issue
# 26): compiles their CUDA artifacts with this tree's mlc, so that what runs
# on the H200 is an artifact built elsewhere and moved there, as a user would.
#
#   MLC=build/mlc bench/artifact_prep.sh      # default build/mlc
#
# Writes build-gpu/artifacts/ (ignored by git: build-*/), to carry:
#   mlp.tgz       examples/mlp.mdl --target cuda (f32; the fatbin for sm_90a and
#                 compute_90 PTX inside), for examples/app and examples/app_cpp
#   minillm.tgz   examples/minillm.mdl --target cuda at a small config in f32
#                 (config.txt says which), for the Python binding
#   config.txt    the MiniLLM's config, which mlc run on the H200 repeats
# Each folder is checked here to name none of this machine's paths (the
# source tree, the mlc build tree, the folder it was written to); the GPU
# script checks the same for the machine it runs on.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mlc=$(realpath "${MLC:-build/mlc}")
dst=build-gpu/artifacts
minillm_config="vocab=512 dim=256 layers=2 heads=4 batch=2 seq=128 compute=f32"
rm -rf "$dst" && mkdir -p "$dst/tmp"
"$mlc" compile examples/mlp.mdl --target cuda -o "$dst/tmp/mlp"
# shellcheck disable=SC2086 # the config is words
"$mlc" compile examples/minillm.mdl --target cuda $minillm_config -o "$dst/tmp/minillm"
echo "$minillm_config" > "$dst/config.txt"
for m in mlp minillm; do
  for t in "$root" "$(dirname "$mlc")" "$root/$dst/tmp/$m"; do
    if grep -l -F "$t" "$dst/tmp/$m"/*.h "$dst/tmp/$m"/*.cmake "$dst/tmp/$m"/*.pc; then
      echo "FAIL: $m's files above name $t"; exit 1
    fi
  done
  tar czf "$dst/$m.tgz" -C "$dst/tmp" "$m"
done
rm -rf "$dst/tmp"
du -ch "$dst"/* $(ls -d build-gpu/lib build-gpu/mlc 2>/dev/null)
if git -C "$root" check-ignore -q "$dst"; then echo "ignored by git: $dst"; else echo "FAIL: git tracks $dst"; exit 1; fi
echo "carry: build-gpu/artifacts build-gpu/lib build-gpu/mlc"
