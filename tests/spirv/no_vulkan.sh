#!/bin/sh
# mlc run --target spirv where the Vulkan loader finds no driver (a driver
# list naming nothing): exit status 4 and a message that says so.
# Usage: no_vulkan.sh MLC WORKDIR
set -u
mlc=$1 work=$2
mkdir -p "$work"
cat > "$work/ew.mdl" <<'MDL'
config { n = 8 }
module Ew(n) {
    forward(a: f32[n]) { return a * a }
}
MDL
VK_DRIVER_FILES=$work/none.json VK_ICD_FILENAMES=$work/none.json MLC_VK_VALIDATE=0 \
  "$mlc" bench "$work/ew.mdl" --target spirv --runs 1 > "$work/out.txt" 2>&1
rc=$?
cat "$work/out.txt"
if [ $rc -ne 4 ]; then echo "FAIL: exit status $rc, expected 4"; exit 1; fi
grep -q "no Vulkan driver on this machine" "$work/out.txt" || { echo "FAIL: no clear message"; exit 1; }
"$mlc" devices --target spirv > /dev/null 2>&1 # a machine without Vulkan at all is not this test's case
echo ok
