#!/bin/sh
# Function multiversioning on the CPU: examples/mlp.mdl compiled once as an
# artifact (kernels for x86-64-v2, -v3 and -v4), its forward timed on each
# build (bench/cpu_versions.c).  Usage:
#   bench/cpu_versions.sh MLC WORKDIR [batch=256 hidden=1024 ...] [-- ITERS]
set -e
mlc=$1 work=$2
shift 2
iters=50
args=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then iters=$2; break; fi
  args="$args $1"
  shift
done
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work/mlp"
# shellcheck disable=SC2086
"$mlc" compile "$here/../examples/mlp.mdl" --target cpu --no-train -o "$work/mlp" $args 2>&1 | tail -1
h=$work/mlp/mlp.h
dim() { sed -n "s/^ \*   $1 .*f32\[\([0-9]*\), \([0-9]*\)\].*/\\$2/p" "$h" | head -1; }
batch=$(dim "in  x" 1) in=$(dim "in  x" 2) out=$(dim "out output" 2)
hidden=$(echo "$args" | sed -n 's/.*hidden=\([0-9]*\).*/\1/p')
hidden=${hidden:-256}
cc -O2 -std=c11 -Wall -Werror -DBATCH="$batch" -DIN="$in" -DHIDDEN="$hidden" -DOUT="$out" "$here/cpu_versions.c" \
  -I"$work/mlp" "$work/mlp/libmlp.a" -l:libcjson.so.1 -lpthread -lm -ldl -o "$work/cpu_versions"
grep -m1 'model name' /proc/cpuinfo || true
"$work/cpu_versions" "$iters"
