#!/usr/bin/env bash
# cmake --install into a temporary prefix, moved elsewhere afterwards (every
# installed path is relative), then used as a user would:
#   - the files: bin/mlc, libmlcrt.a and .so, include/mlc/runtime/*.h,
#     lib/cmake/mlc/mlcConfig.cmake, lib/pkgconfig/mlcrt.pc;
#   - a program on the runtime's C API, built with find_package(mlc CONFIG)
#     (mlc::runtime, the shared library), with pkg-config (shared) and with
#     pkg-config --static; each prints exactly the expected lines;
#   - the installed mlc compiles examples/mlp.mdl, whose artifact (the
#     installed runtime inside) is built four ways and checked against
#     PyTorch (tests/ref/artifact_check.py);
#   - the Python package, installed by cmake and by pip, runs that artifact
#     and gives the C app's logits bit for bit.
# Usage: install.sh BUILD_DIR ROOT WORKDIR [LINK_FLAG ...]
set -uo pipefail
build=$(realpath "$1") root=$(realpath "$2") work=$3
shift 3
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
cmake --install "$build" --prefix "$work/first" > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
mv "$work/first" "$work/prefix"
p=$work/prefix
for f in bin/mlc lib/libmlcrt.a lib/libmlcrt.so include/mlc/runtime/session.h include/mlc/runtime/status.h \
         include/mlc/runtime/tensor.h include/mlc/runtime/version.h include/mlc/runtime/cpu/device.h \
         lib/cmake/mlc/mlcConfig.cmake lib/cmake/mlc/mlcConfigVersion.cmake lib/pkgconfig/mlcrt.pc; do
  [ -e "$p/$f" ] || fail "the prefix has no $f"
done
if grep -rlF -e "$root" -e "$build" -e "$work/first" "$p/lib/cmake" "$p/lib/pkgconfig" "$p/include"; then fail "installed files name the trees"; fi

mkdir -p "$work/app"
cat > "$work/app/app.c" <<'APP'
#include <stdio.h>
#include "runtime/tensor.h"
#include "runtime/version.h"
int main(void) {
  float buf[3];
  mlc_tensor t = {MLC_DTYPE_F32, 1, {3}, buf, sizeof buf};
  int64_t dims[1] = {4};
  mlc_status st = mlc_tensor_check(&t, "f", "input", "x", MLC_DTYPE_F32, 1, dims);
  printf("runtime %d (header %d)\n%s: %s\n", mlc_runtime_version(), MLC_VERSION_NUMBER,
         mlc_status_code_name(mlc_status_code(st)), mlc_status_message(st));
  mlc_status_free(st);
  return 0;
}
APP
cat > "$work/app/CMakeLists.txt" <<'APP'
cmake_minimum_required(VERSION 3.20)
project(installed_app C)
find_package(mlc 0.2 CONFIG REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE mlc::runtime)
APP
cmake -S "$work/app" -B "$work/app/build" -G Ninja -DCMAKE_PREFIX_PATH="$p" > "$work/app.log" 2>&1 &&
  cmake --build "$work/app/build" >> "$work/app.log" 2>&1 || { cat "$work/app.log"; fail "find_package(mlc) app"; }
export PKG_CONFIG_PATH=$p/lib/pkgconfig
# shellcheck disable=SC2046
cc -std=c11 "$work/app/app.c" -o "$work/app/app-pc" $(pkg-config --cflags --libs mlcrt) "$@" ||
  fail "pkg-config mlcrt"
# shellcheck disable=SC2046
cc -std=c11 "$work/app/app.c" -o "$work/app/app-static" $(pkg-config --cflags mlcrt) "$p/lib/libmlcrt.a" \
  $(pkg-config --static --libs-only-other --libs-only-l mlcrt | sed 's/-lmlcrt//') "$@" || fail "pkg-config --static mlcrt"
expect="runtime 200 (header 200)
INVALID_ARGUMENT: f: input 'x' is f32[4], got f32[3]"
for app in "$work/app/build/app" "$work/app/app-pc" "$work/app/app-static"; do
  got=$(LD_LIBRARY_PATH=$p/lib "$app" 2>&1)
  [ "$got" = "$expect" ] || fail "$app printed:
$got
expected:
$expect"
  echo "ok $app"
done
ldd "$work/app/app-static" | grep -q libmlcrt && fail "app-static links libmlcrt.so"
/usr/bin/python3 "$root/tests/ref/artifact_check.py" "$p/bin/mlc" "$root" "$work/artifact" "$@" || exit 1
# the Python package, installed two ways, on the moved artifact: imported from where it was installed (not the
# source tree), its version the compiler's, its logits on the same weights and batch the C app's (logits-cc.bin,
# before its SGD step) bit for bit
a=$work/artifact
check_python() { # DIR WHAT
  PYTHONPATH=$1 /usr/bin/python3 - "$1" "$a/moved/mlp" "$a" "$("$p/bin/mlc" --version)" "$2" <<'PY' || fail "$2"
import sys
import numpy as np
prefix, model, work, version, what = sys.argv[1:6]
import mlc
assert mlc.__file__.startswith(prefix), f"mlc imported from {mlc.__file__}, not from {prefix}"
assert version == f"mlc {mlc.__version__}", f"the package is {mlc.__version__}, the compiler says {version!r}"
m = mlc.load(model)
m.load_weights(f"{work}/mlp.safetensors")
x = np.fromfile(f"{work}/x.bin", dtype=np.float32).reshape(32, -1)
got = np.asarray(m.forward(x)).reshape(32, 10)
want = np.fromfile(f"{work}/logits-cc.bin", dtype=np.float32).reshape(2, 32, 10)[0]
assert np.array_equal(got, want), f"logits differ from the C app's by {np.abs(got - want).max()}"
print(f"ok {what} ({version}): logits equal to the cc app's")
PY
}
check_python "$p/lib/python3/dist-packages" "python from the installed prefix"
# pip: the package from python/ (pyproject.toml) into a folder of its own, offline
rm -rf "$work/pip" "$work/python" && cp -r "$root/python" "$work/python" # setuptools writes beside the sources
/usr/bin/python3 -m pip install --quiet --no-build-isolation --no-deps --no-index --target "$work/pip" "$work/python" \
  > "$work/pip.log" 2>&1 || { cat "$work/pip.log"; fail "pip install python/"; }
check_python "$work/pip" "pip install python/"
