#!/bin/sh
# A compiled plan as a file of its own (mlc compile --target spirv -o DIR
# writes DIR/<name>.mlcplan), run two ways without compiling again:
#  1. by a C program that has no generated code (plan_app.c): mlc_plan_read_file, then
#     mlc_device_create(NULL, ...) with the plan alone (the driver is the
#     one its code is for), then a session.  Its outputs are a * b + a bit
#     for bit as C computes it in f32, rounded twice or (a fused multiply-add,
#     as NVIDIA's compilers make it) once.
#  2. by `mlc run|train DIR/mlp.mlcplan`: the forward's output and the
#     checkpoint after 3 training steps are byte-identical to those of
#     `mlc run|train mlp.mdl --target spirv` (or cuda).
# Then the refusals, each with its message and exit status: a plan given
# options that say how to compile, compile and generate of a plan, a
# --target its code is not for, a missing, foreign, truncated and corrupt
# file.
# Usage: plan_file.sh MLC SRCDIR WORKDIR PLAN_APP [TARGET] (PLAN_APP:
# tests/spirv/plan_app.c linked against libmlcrt alone; TARGET spirv, the
# default, or cuda, on a GPU machine).  Exit 77 without the target's driver.
set -u
mlc=$1 src=$2 work=$3 app=$4 target=${5:-spirv}
case $target in
  spirv) driver=vulkan ;;
  cuda) driver=cuda ;;
  *) echo "plan_file.sh: TARGET is spirv or cuda"; exit 2 ;;
esac
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

cat > "$work/ew.mdl" <<'MDL'
config { n = 1000 }
module Ew(n) {
    forward(a: f32[n], b: f32[n]) { return a * b + a }
}
MDL
"$mlc" compile "$work/ew.mdl" --target $target -o "$work/ew" 2> "$work/compile.log" || { cat "$work/compile.log"; exit 1; }
grep -q "ew.mlcplan (the plan with its kernels)" "$work/compile.log" || fail "compile does not say it wrote ew.mlcplan"
[ -s "$work/ew/ew.mlcplan" ] || fail "no ew.mlcplan in the artifact"
"$app" "$work/ew/ew.mlcplan" > "$work/app.log" 2>&1
rc=$?
cat "$work/app.log"
if grep -Eq "no Vulkan|no NVIDIA driver" "$work/app.log"; then echo "no $driver driver here: skipped"; exit 77; fi
[ $rc -eq 0 ] || fail "plan_app: exit status $rc"
if grep -Eq "Vulkan validation (error|warning)|validation message" "$work/app.log"; then fail "validation messages"; fi

# mlc run and train of the plan, against the same from the .mdl.
mdl=$src/examples/mlp.mdl
"$mlc" compile "$mdl" --target $target -o "$work/mlp" 2> "$work/compile2.log" || { cat "$work/compile2.log"; exit 1; }
plan=$work/mlp/mlp.mlcplan
python3 - "$work" <<'PY' || fail "cannot write the inputs"
import struct, sys
w = sys.argv[1]
xs = [((i * 7919) % 1000) / 500.0 - 1.0 for i in range(32 * 784)]
open(w + "/x.bin", "wb").write(struct.pack("<%df" % len(xs), *xs))
def npy(path, descr, shape, data):  # the .npy format, version 1.0
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join("%d," % d for d in shape))
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data)
npy(w + "/xs.npy", "<f4", (128, 784), struct.pack("<%df" % (4 * len(xs)), *(xs * 4)))
npy(w + "/labels.npy", "<i4", (128,), struct.pack("<128i", *[(i * 3) % 10 for i in range(128)]))
PY
"$mlc" run "$mdl" --target $target --input x="$work/x.bin" -o output="$work/y_mdl.bin" > "$work/run_mdl.log" 2>&1 \
  || { cat "$work/run_mdl.log"; fail "run of the .mdl"; }
"$mlc" run "$plan" --input x="$work/x.bin" -o output="$work/y_plan.bin" > "$work/run_plan.log" 2>&1 \
  || { cat "$work/run_plan.log"; fail "run of the plan"; }
cmp "$work/y_mdl.bin" "$work/y_plan.bin" || fail "the plan's forward differs from the .mdl's"
grep -q "^output: f32\[32, 10\]" "$work/run_plan.log" || fail "run of the plan prints no output line"
for how in mdl plan; do
  if [ $how = mdl ]; then m=$mdl; t="--target $target"; else m=$plan; t=""; fi
  # shellcheck disable=SC2086
  "$mlc" train "$m" $t --steps 3 --input x="$work/xs.npy" --input labels="$work/labels.npy" \
    --save "$work/ck_$how.mlcck" > "$work/train_$how.log" 2>&1 || { cat "$work/train_$how.log"; fail "train of the $how"; }
done
cmp "$work/ck_mdl.mlcck" "$work/ck_plan.mlcck" || fail "3 steps from the plan give another checkpoint than from the .mdl"
grep "^step 3: loss" "$work/train_plan.log" || fail "train of the plan prints no step 3"
# profile's --entry picks what to time (not what to compile): taken with a plan.
"$mlc" profile "$plan" --entry train_step --steps 2 > "$work/profile.log" 2>&1 || { cat "$work/profile.log"; fail "profile of the plan"; }
grep -q "steps, .* ms per run over 2 runs" "$work/profile.log" || fail "profile of the plan prints no summary"

# The refusals: exit status and message.
expect() { # STATUS MESSAGE-PART mlc ARGS...
  want=$1 part=$2
  shift 2
  "$mlc" "$@" > "$work/err.log" 2>&1
  got=$?
  if [ $got -ne "$want" ] || ! grep -qF -- "$part" "$work/err.log"; then
    cat "$work/err.log"; fail "mlc $*: exit status $got (expected $want), message wanted: $part"
  fi
}
expect 2 "-D says how to compile, but $plan is compiled already" run "$plan" -D batch=4
expect 2 "batch=4 says how to compile" run "$plan" batch=4
expect 2 "--f32-matmul says how to compile" bench "$plan" --f32-matmul ieee
expect 2 "--accum says how to compile" train "$plan" --steps 1 --accum 2
expect 2 "is a compiled plan, which mlc run, bench, train and profile take" compile "$plan"
expect 1 "--target cpu: $plan holds code for the $driver driver (--target $target)" run "$plan" --target cpu --input x="$work/x.bin"
expect 1 "$work/none.mlcplan: cannot open" run "$work/none.mlcplan"
echo "not a plan" > "$work/text.mlcplan"
expect 1 "not an mlc plan" run "$work/text.mlcplan"
head -c 4000 "$plan" > "$work/short.mlcplan"
expect 1 "$work/short.mlcplan: its header says" run "$work/short.mlcplan"
cp "$plan" "$work/bad.mlcplan"
printf '\001' | dd of="$work/bad.mlcplan" bs=1 seek=3000 conv=notrunc 2> /dev/null
expect 1 "$work/bad.mlcplan: plan checksum mismatch" run "$work/bad.mlcplan"
echo ok
