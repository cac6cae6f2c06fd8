#!/usr/bin/env bash
# mlc calibrate --target spirv on the Vulkan device here (lavapipe in CI):
# the probes grow until they time well, the ceilings (the bf16 and FP32
# roofs, the bandwidth) are cached under the device's name, and `mlc profile
# --target spirv` then says it uses them.
# Usage: calibrate.sh MLC ROOT WORKDIR.  Exit 77 without any Vulkan driver.
set -uo pipefail
mlc=$1 root=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
export XDG_CACHE_HOME=$work/cache
out=$("$mlc" calibrate --target spirv 2>&1); rc=$?
echo "$out" | sed 's/^/  | /'
if echo "$out" | grep -q "no Vulkan"; then echo "no Vulkan driver here: skipped"; exit 77; fi
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; exit 1; }
/usr/bin/python3 - "$work/cache/mlc/ceilings-cuda.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
ok = [k for k, v in d.items() if "calibrate --target spirv" in v.get("calibrated", "") and v["peak_gflops"] > 0 and v["bandwidth_gbs"] > 0]
print("cached:", ok)
if len(ok) != 1: sys.exit("FAIL: no calibrated Vulkan device in the cache")
# the FP32 roof measured too (an f32 GEMM), beside the bf16 one
u = d[ok[0]].get("units", {})
print("units:", u)
if not (u.get("fp32", {}).get("from") == "measured" and u["fp32"]["gflops"] > 0 and u.get("bf16", {}).get("from") == "measured"):
    sys.exit("FAIL: the fp32 and bf16 roofs are not both measured")
if "fp32 f32 GEMM" not in d[ok[0]]["calibrated"]: sys.exit("FAIL: the cache does not say how fp32 was measured")
PY
prof=$("$mlc" profile "$root/examples/mlp.mdl" --target spirv --steps 1 2>&1) || { echo "$prof"; echo "FAIL: profile"; exit 1; }
echo "$prof" | grep -q "from cached calibration in $work/cache/mlc/ceilings-cuda.json" || { echo "$prof" | head; echo "FAIL: the profile does not use the calibration"; exit 1; }
"$mlc" calibrate --target spirv --device 99 >/dev/null 2>&1 && { echo "FAIL: --device 99 accepted"; exit 1; }
echo PASS
