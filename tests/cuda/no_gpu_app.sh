#!/usr/bin/env bash
# An application linked against a CUDA artifact, run where there is no
# NVIDIA driver: it must fail cleanly, with the runtime's message, not a
# loader error or a crash.  examples/app built against examples/mlp.mdl
# compiled with --target cuda; with PYTHON, the same folder loaded by the
# Python binding (python/mlc) too, which must raise mlc.Error with the
# runtime's message.  Usage: no_gpu_app.sh MLC ROOT WORKDIR [PYTHON]
set -euo pipefail
mlc=$1 root=$2 work=$3 python=${4:-}
if ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then echo "this machine has an NVIDIA driver: skipped"; exit 77; fi
rm -rf "$work" && mkdir -p "$work"
export XDG_CACHE_HOME=$work/cache
"$mlc" compile "$root/examples/mlp.mdl" --target cuda -o "$work/model" 2> "$work/compile.log"
cmake -S "$root/examples/app" -B "$work/app" -G Ninja -DMODEL_DIR="$work/model" > "$work/cmake.log"
cmake --build "$work/app" > "$work/build.log"
head -c 100352 /dev/zero > "$work/x.bin"     # x: f32[32, 784]
head -c 128 /dev/zero > "$work/labels.bin"      # labels: i32[32]
set +e
"$work/app/app" "$work/w.safetensors" "$work/x.bin" "$work/labels.bin" "$work/logits.bin" > "$work/run.log" 2>&1
rc=$?
set -e
cat "$work/run.log"
if [ $rc -eq 1 ] && grep -q "no NVIDIA driver on this machine" "$work/run.log"; then
  echo "ok the app"
else
  echo "FAIL the app: exit status $rc; expected 1 and the runtime's message"
  bad=1
fi
if [ -n "$python" ]; then
  set +e
  PYTHONPATH="$root/python" "$python" - "$work/model" > "$work/python.log" 2>&1 <<'PY'
import sys
import mlc
try:
    mlc.load(sys.argv[1])
except mlc.Error as e:
    print(f"mlc.Error ({e.code}): {e}")
    sys.exit(0 if e.code == "UNIMPLEMENTED" and "no NVIDIA driver on this machine" in str(e) else 1)
sys.exit("loaded without a driver")
PY
  prc=$?
  set -e
  cat "$work/python.log"
  if [ $prc -eq 0 ]; then echo "ok mlc.load from Python"; else echo "FAIL mlc.load from Python"; bad=1; fi
fi
if [ -n "${bad:-}" ]; then echo "some failed"; exit 1; fi
echo "all passed"
