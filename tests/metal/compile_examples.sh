#!/usr/bin/env bash
# Every example compiled with --target metal gives MSL that compiles as
# C++17 against the emulation header with -Wall -Wextra -Werror, and the
# header passes its own tests (tests/metal/test_msl_emu.cpp).
# Usage: compile_examples.sh MLC ROOT WORKDIR
set -euo pipefail
mlc=$1 root=$2 work=$3
cxx=${MLC_EMU_CXX:-clang++}
rm -rf "$work" && mkdir -p "$work"
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass+1)); else echo "FAIL $1"; fail=$((fail+1)); fi; }
check "the emulation header's own tests" \
  "$cxx -std=c++17 -O2 -Wall -Wextra -Werror -pthread $root/tests/metal/test_msl_emu.cpp -o $work/test_msl_emu > $work/emu.log 2>&1 && $work/test_msl_emu >> $work/emu.log 2>&1"
tail -1 "$work/emu.log"
for m in mlp linear minillm; do
  "$mlc" compile "$root/examples/$m.mdl" --target metal -o "$work/$m" 2> "$work/$m.log"
  f=$(ls "$work/$m"/*.metal)
  check "$m: $(grep -c '^kernel void' "$f") MSL kernels compile as C++ with -Wall -Wextra -Werror" \
    "$cxx -std=c++17 -O0 -Wall -Wextra -Werror -pthread -fsyntax-only -include $root/tests/metal/msl_emu.hpp -x c++ $f > $work/$m.cxx.log 2>&1"
  check "$m: its GEMMs use simdgroup_matrix" "grep -q simdgroup_multiply_accumulate $f"
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
