#!/usr/bin/env bash
# The second command of the README: the whole test suite.
#   1. the normal build (build/), every test;
#   2. the same suite built with AddressSanitizer and UBSan (build-asan/);
#   3. the libFuzzer harnesses built with clang (build-fuzz/), a short run each.
# Ends with one line "N passed, N failed" over all three, and exits non-zero
# on any failure.  Set MLC_TEST_QUICK=1 to run step 1 only.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
passed=0
failed=0
status=0
logdir=build-logs
mkdir -p "$logdir"
# Mesa's shader cache (the pipelines lavapipe compiled), one for the three
# suites: the sanitizer suite then finds the kernels the first suite had
# lavapipe compile, where compiling them again in Mesa's LLVM under ASan's
# allocator takes ten to twenty times as long (and is not our code).  mlc's
# own cache stays per build, so each build's compiler still runs.
export MESA_SHADER_CACHE_DIR=${MESA_SHADER_CACHE_DIR:-$PWD/$logdir/mesa-shader-cache}

run_suite() { # name, build dir, ctest args...
  local name=$1 dir=$2
  shift 2
  echo "== $name"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" "$@") 2>&1 | tee "$logdir/$name.log"
  local rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$logdir/$name.log" | tail -1)
  if [ -z "$line" ]; then
    echo "!! $name: ctest printed no summary"
    failed=$((failed + 1))
    status=1
    return
  fi
  local f t
  f=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
  t=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
  passed=$((passed + t - f))
  failed=$((failed + f))
  [ "$rc" -eq 0 ] || status=1
}

# The versions of what the results depend on, so a failure on one machine
# can be told from one on another (a new Mesa, loader or compiler).
versions() {
  echo "== versions"
  local p v
  for p in mesa-vulkan-drivers libvulkan1 vulkan-validationlayers spirv-tools gcc-12 clang-14 llvm-14-dev \
           libclang-rt-14-dev python3-torch libopenmpi3; do
    v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null) || v="not installed"
    printf '  %-24s %s\n' "$p" "$v"
  done
  printf '  %-24s %s\n' "cc" "$(cc --version 2>/dev/null | head -1)"
  printf '  %-24s %s\n' "nvcc" "$( (/usr/local/cuda/bin/nvcc --version 2>/dev/null || echo none) | tail -1)"
}
versions

build() { # dir, cmake args...
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja "$@" >"$logdir/$(basename "$dir").cmake.log" 2>&1 &&
    ninja -C "$dir" >"$logdir/$(basename "$dir").ninja.log" 2>&1 || {
      echo "!! build in $dir failed:"; tail -n 40 "$logdir/$(basename "$dir").cmake.log" "$logdir/$(basename "$dir").ninja.log"
      failed=$((failed + 1)); status=1; return 1; }
}

build build -DCMAKE_BUILD_TYPE=RelWithDebInfo && run_suite tests build -LE bench
if [ "${MLC_TEST_QUICK:-0}" != 1 ]; then
  build build-asan -DCMAKE_BUILD_TYPE=Debug -DMLC_SANITIZE=ON &&
    ASAN_OPTIONS=detect_leaks=1 run_suite tests-asan build-asan -LE "fuzz|slow|bench|valgrind"
  CC=clang CXX=clang++ build build-fuzz -DCMAKE_BUILD_TYPE=Debug -DMLC_FUZZ=ON -DBUILD_TESTING=ON &&
    run_suite fuzz build-fuzz -L fuzz
fi
echo
echo "$passed passed, $failed failed"
exit $status
