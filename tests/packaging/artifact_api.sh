#!/usr/bin/env bash
# Builds tests/packaging/artifact_api.c against examples/mlp.mdl compiled as
# mlpb (batch 2) with one cc line, and runs it.
# Usage: artifact_api.sh MLC ROOT WORKDIR [LINK_FLAG ...]
# (LINK_FLAG: the sanitizer build's, so the test runs under ASan there).
set -uo pipefail
mlc=$1 root=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work" || exit 1
if ! "$mlc" compile "$root/examples/mlp.mdl" --target cpu --name mlpb batch=2 -o "$work/mlpb" 2> "$work/compile.log"; then
  cat "$work/compile.log"; echo "0 passed, 1 failed"; exit 1
fi
if ! cc -std=c11 -Wall -Wextra -Werror -g "$@" -I"$work/mlpb" -o "$work/artifact_api" \
     "$root/tests/packaging/artifact_api.c" "$work/mlpb/libmlpb.a" \
     -l:libcjson.so.1 -lpthread -lm -ldl 2> "$work/build.log"; then
  cat "$work/build.log"; echo "0 passed, 1 failed"; exit 1
fi
"$work/artifact_api" "$work"
