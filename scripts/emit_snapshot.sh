#!/usr/bin/env bash
# Records what mlc emits for every examples/*.mdl and bench/*.mdl model on
# every target, so that a refactoring can show the emitted code unchanged:
#
#   scripts/emit_snapshot.sh build/mlc /tmp/before       # before the change
#   scripts/emit_snapshot.sh build/mlc /tmp/after        # after it
#   scripts/emit_snapshot.sh --compare /tmp/before /tmp/after
#
# Per model and target (cpu, cuda, spirv, metal): the final IR (--emit ir),
# the artifact's files (the .cu, .metal, .spv sources or the CPU's object
# files, <name>.h, <name>.c with the plan, <name>.cmake, <name>.pc; not
# lib<name>.a, which holds the runtime), the exit status and the messages.
# nvcc is left out (MLC_NVCC points nowhere) unless SNAPSHOT_NVCC=1: the
# fatbin is nvcc's output from the .cu, which is compared itself; without it
# every compile is seconds.  --compare exits 0 when the two are identical.
set -uo pipefail
if [ "${1:-}" = "--compare" ]; then
  # recordings made before the timings were normalised
  sed -i -E 's/ in [0-9]+\.[0-9]+ s/ in T s/g' "$2"/*/stderr.txt "$3"/*/stderr.txt
  if diff -r "$2" "$3" >/dev/null; then
    echo "identical: $(find "$2" -type f | wc -l) files under $2 and $3"
    exit 0
  fi
  diff -r "$2" "$3" | head -50
  echo "DIFFERENT"
  exit 1
fi
mlc=$(realpath "$1")
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
[ "${SNAPSHOT_NVCC:-0}" = 1 ] || export MLC_NVCC=/nonexistent/nvcc
cd "$root"
for f in examples/*.mdl bench/*.mdl; do
  m=$(basename "$f" .mdl)
  for t in ${SNAPSHOT_TARGETS:-cpu cuda spirv metal}; do
    d="$out/$m.$t"
    rm -rf "$d"
    mkdir -p "$d/artifact"
    "$mlc" compile "$f" --target "$t" --emit ir -o "$d/artifact" >"$d/ir.txt" 2>"$d/stderr.txt"
    echo $? >"$d/rc"
    rm -f "$d"/artifact/lib*.a
    # the messages name the artifact's directory: make them independent of $out
    sed -i "s#$d/artifact#ARTIFACT#g" "$d/stderr.txt"
    # and their timings ("in 0.25 s") differ from run to run
    sed -i -E 's/ in [0-9]+\.[0-9]+ s/ in T s/g' "$d/stderr.txt"
  done
done
echo "recorded $(find "$out" -type f | wc -l) files under $out"
