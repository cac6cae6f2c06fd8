#!/usr/bin/env bash
# A fresh Release tree (-O3 -DNDEBUG, where GCC's and Clang's flow analysis
# warns most: "may be used uninitialized"), everything with -Wall -Wextra
# -Werror as in the developers' RelWithDebInfo trees, the tests included.
# Slow (the whole project again: about 10 minutes on 2 cores), so labelled
# slow.  Usage: release.sh ROOT WORKDIR C_COMPILER
set -uo pipefail
root=$1 work=$2 cc=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
if ! cmake -S "$root" -B "$work/tree" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" > "$work/configure.log" 2>&1; then
  cat "$work/configure.log"; echo "0 passed, 1 failed"; exit 1
fi
if ! ninja -C "$work/tree" -j2 > "$work/build.log" 2>&1; then
  grep -E "error|warning" "$work/build.log" | head -40; echo "0 passed, 1 failed"; exit 1
fi
if grep -q "warning:" "$work/build.log"; then
  grep "warning:" "$work/build.log" | head -40; echo "0 passed, 1 failed"; exit 1
fi
echo "Release build with $cc: no warnings"
echo "1 passed, 0 failed"
