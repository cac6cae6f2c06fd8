#!/usr/bin/env bash
# Builds tests/packaging/generate_app.c against examples/minillm_causal.mdl
# (one layer) compiled for the CPU, runs it, and compares its greedy and
# sampled tokens with `mlc generate`'s for the same prompt, weights (create's,
# drawn with seed 0, saved by the app) and sampling.  Usage: generate_app.sh MLC ROOT WORKDIR [LINK_FLAG ...]
set -uo pipefail
mlc=$1 root=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work" || exit 1
model="$root/examples/minillm_causal.mdl"
if ! "$mlc" compile "$model" --target cpu layers=1 -o "$work/lm" 2> "$work/compile.log"; then
  cat "$work/compile.log"; echo "0 passed, 1 failed"; exit 1
fi
if ! cc -std=c11 -Wall -Wextra -Werror -g "$@" -I"$work/lm" -o "$work/generate_app" "$root/tests/packaging/generate_app.c" \
     "$work/lm/libminillm.a" -l:libcjson.so.1 -lpthread -lm -ldl 2> "$work/build.log"; then
  cat "$work/build.log"; echo "0 passed, 1 failed"; exit 1
fi
"$work/generate_app" 12 "$work/w.safetensors" > "$work/app.txt"
status=$?
cat "$work/app.txt"
prompt=$(seq -s, 1 18)
cli_greedy=$("$mlc" generate "$model" layers=1 --weights "$work/w.safetensors" --prompt "$prompt" --max-new 12 2>/dev/null | sed -n 's/^tokens: //p')
cli_sampled=$("$mlc" generate "$model" layers=1 --weights "$work/w.safetensors" --prompt "$prompt" --max-new 12 --temperature 0.8 --top-k 20 --seed 7 \
              2>/dev/null | sed -n 's/^tokens: //p')
pass=0 fail=0
for kind in greedy sampled; do
  app=$(sed -n "s/^$kind: //p" "$work/app.txt")
  cli=$([ $kind = greedy ] && echo "$cli_greedy" || echo "$cli_sampled")
  if [ -n "$app" ] && [ "$app" = "$cli" ]; then echo "ok $kind tokens equal mlc generate's: $app"; pass=$((pass + 1))
  else echo "FAIL $kind: the app gave '$app', mlc generate '$cli'"; fail=$((fail + 1)); fi
done
ok=$(grep -c '^ok' "$work/app.txt"); bad=$(grep -c '^FAIL' "$work/app.txt")
[ $status -eq 0 ] || bad=$((bad + 1))
echo "$((pass + ok)) passed, $((fail + bad)) failed"
[ $((fail + bad)) -eq 0 ]
