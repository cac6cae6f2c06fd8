#!/usr/bin/env bash
# The first command of the README: installs what is missing, builds mlc in
# build/, and compiles the main example, examples/minillm.mdl, for the CPU
# (the artifact lands in build/minillm/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
ninja -C build
echo
echo "== mlc compile examples/minillm.mdl --target cpu -o build/minillm --stats"
build/mlc compile examples/minillm.mdl --target cpu -o build/minillm --stats --time-passes
