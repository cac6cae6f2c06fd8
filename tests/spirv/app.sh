#!/bin/sh
# An application linked against a SPIR-V artifact (mlc compile --target
# spirv -o DIR: the modules embedded in <name>.c with the kernel table),
# built with the artifact's pkg-config file: its forward runs on Vulkan
# device 0 and gives a * b + a bit for bit as C computes it in f32; where
# the loader finds no driver it fails with the runtime's message, exit 1.
# Usage: app.sh MLC WORKDIR CC.  Exit 77 without any Vulkan driver.
set -u
mlc=$1 work=$2 cc=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
cat > "$work/ew.mdl" <<'MDL'
config { n = 1000 }
module Ew(n) {
    forward(a: f32[n], b: f32[n]) { return a * b + a }
}
MDL
cat > "$work/app.c" <<'APP'
#include <stdio.h>
#include <string.h>
#include "ew.h"
int main(void) {
  static float a[1000], b[1000], out[1000];
  for (int i = 0; i < 1000; i++) { a[i] = (float)i * 0.25f - 7.0f; b[i] = 2.0f - (float)i * 0.01f; }
  ew *m;
  mlc_status st = ew_create(NULL, &m);
  if (st) { fprintf(stderr, "app: %s\n", mlc_status_message(st)); mlc_status_free(st); return 1; }
  for (int run = 0; run < 2 && !st; run++) st = ew_forward(m, a, b, out);
  if (st) { fprintf(stderr, "app: %s\n", mlc_status_message(st)); mlc_status_free(st); ew_destroy(m); return 1; }
  int bad = 0;
  for (int i = 0; i < 1000; i++) {
    float p = a[i] * b[i], want = p + a[i];
    bad += memcmp(&want, &out[i], sizeof want) != 0;
  }
  ew_destroy(m);
  printf("%d of 1000 outputs differ from a * b + a\n", bad);
  return bad != 0;
}
APP
"$mlc" compile "$work/ew.mdl" --target spirv -o "$work/model" 2> "$work/compile.log" || { cat "$work/compile.log"; exit 1; }
ls "$work/model"/*.spv > /dev/null || { echo "FAIL: no .spv files in the artifact"; exit 1; }
# shellcheck disable=SC2046
$cc -std=c11 -ffp-contract=off -o "$work/app" "$work/app.c" \
  $(PKG_CONFIG_PATH="$work/model" pkg-config --cflags --libs ew) -ldl || { echo "FAIL: the app does not build"; exit 1; }
"$work/app" > "$work/run.log" 2>&1
rc=$?
cat "$work/run.log"
if grep -q "no Vulkan" "$work/run.log"; then echo "no Vulkan driver here: skipped"; exit 77; fi
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
if grep -Eq "Vulkan validation (error|warning)|validation message" "$work/run.log"; then echo "FAIL: validation messages"; exit 1; fi
VK_DRIVER_FILES=$work/none.json VK_ICD_FILENAMES=$work/none.json MLC_VK_VALIDATE=0 "$work/app" > "$work/none.log" 2>&1
rc=$?
cat "$work/none.log"
if [ $rc -ne 1 ] || ! grep -q "no Vulkan driver on this machine" "$work/none.log"; then
  echo "FAIL: without a driver: exit status $rc, expected 1 and the runtime's message"; exit 1
fi
echo ok
