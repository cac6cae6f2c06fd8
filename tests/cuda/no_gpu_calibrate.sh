#!/usr/bin/env bash
# `mlc calibrate --target cuda` where there is no NVIDIA driver: it must fail
# cleanly (exit status 4, not available here; the runtime's "no NVIDIA driver" message, nothing
# printed on standard output, nothing compiled or cached), and a bad
# --device or option is a usage error (2).  Usage: no_gpu_calibrate.sh MLC WORKDIR
set -uo pipefail
mlc=$1 work=$2
if ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then echo "this machine has an NVIDIA driver: skipped"; exit 77; fi
rm -rf "$work" && mkdir -p "$work"
export XDG_CACHE_HOME=$work/cache
fails=0
check() { # what, expected status, actual status, stderr file, expected start of stderr
  if [ "$3" -eq "$2" ] && head -1 "$4" | grep -q "^$5"; then echo "ok: $1"
  else echo "FAILED: $1: exit status $3 (expected $2), stderr:"; cat "$4"; fails=$((fails + 1)); fi
}
"$mlc" calibrate --target cuda --device 0 > "$work/out.log" 2> "$work/err.log"
check "no driver" 4 $? "$work/err.log" "mlc: no NVIDIA driver on this machine: cannot load libcuda.so.1"
if [ -s "$work/out.log" ] || [ -e "$work/cache" ]; then echo "FAILED: printed or cached something"; fails=$((fails + 1)); fi
"$mlc" calibrate --target=cuda > /dev/null 2> "$work/err2.log"
check "no driver, --target=cuda" 4 $? "$work/err2.log" "mlc: no NVIDIA driver on this machine"
"$mlc" calibrate --target cuda --device x > /dev/null 2> "$work/err3.log"
check "bad --device" 2 $? "$work/err3.log" "mlc: --device x: expected a GPU number from 0"
"$mlc" calibrate --target cuda --threads 2 > /dev/null 2> "$work/err4.log"
check "an option of the CPU's" 2 $? "$work/err4.log" "mlc: calibrate --target cuda does not take '--threads'"
if [ $fails -eq 0 ]; then echo "4 passed, 0 failed"; else echo "$((4 - fails)) passed, $fails failed"; exit 1; fi
