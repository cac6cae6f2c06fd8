#!/usr/bin/env bash
# Builds tests/packaging/two_models.c against examples/mlp.mdl compiled twice
# (--name mlp1 with batch=1, --name mlp4 with batch=4) with one cc line, and
# runs it.  Usage: two_models.sh MLC ROOT WORKDIR [LINK_FLAG ...]
# (LINK_FLAG: the sanitizer build's, so the test runs under ASan there).
set -uo pipefail
mlc=$1 root=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work" || exit 1
for b in 1 4; do
  if ! "$mlc" compile "$root/examples/mlp.mdl" --target cpu --name "mlp$b" batch=$b -o "$work/mlp$b" 2> "$work/compile$b.log"; then
    cat "$work/compile$b.log"; echo "0 passed, 1 failed"; exit 1
  fi
done
if ! cc -std=c11 -Wall -Wextra -Werror -g "$@" -I"$work/mlp1" -I"$work/mlp4" -o "$work/two_models" \
     "$root/tests/packaging/two_models.c" "$work/mlp1/libmlp1.a" "$work/mlp4/libmlp4.a" \
     -l:libcjson.so.1 -lpthread -lm -ldl 2> "$work/build.log"; then
  cat "$work/build.log"; echo "0 passed, 1 failed"; exit 1
fi
"$work/two_models"
