#!/bin/sh
# LeakSanitizer catches a Vulkan object that mlc leaks (vk_leak.c plants
# one), with the driver kept loaded so that its frames are named, and
# reports nothing else: no leak of the driver's own from an unknown module.
# Usage: vk_leak.sh VK_LEAK_BINARY WORKDIR
set -u
bin=$1 work=$2
mkdir -p "$work"
# fast_unwind_on_malloc=0: the driver has no frame pointers, so the stack is
# walked through its unwind tables to reach mlc's frames.
ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 MLC_VK_VALIDATE=0 "$bin" > "$work/out.txt" 2>&1
rc=$?
cat "$work/out.txt"
[ $rc -eq 77 ] && exit 77
fail() { echo "FAIL: $*"; exit 1; }
[ $rc -ne 0 ] || fail "exit status 0: LeakSanitizer did not report the planted VkBuffer"
grep -q "planted: one VkBuffer" "$work/out.txt" || fail "the leak was not planted (exit status $rc)"
grep -q "ERROR: LeakSanitizer: detected memory leaks" "$work/out.txt" || fail "no LeakSanitizer report"
# Every leak's stack passes through plant_vulkan_leak, and none through a module LeakSanitizer cannot name.
awk '/^(Direct|Indirect) leak/ { if (blk != "" && blk !~ /plant_vulkan_leak/) bad++; blk = $0; next }
     /^ +#[0-9]/ { blk = blk "\n" $0 }
     END { if (blk != "" && blk !~ /plant_vulkan_leak/) bad++; exit bad ? 1 : 0 }' "$work/out.txt" ||
  fail "a leak that is not the planted one"
if grep -q "<unknown module>" "$work/out.txt"; then fail "a frame in an unloaded module"; fi
echo "ok: the planted VkBuffer is reported, through named driver frames, and nothing else"
