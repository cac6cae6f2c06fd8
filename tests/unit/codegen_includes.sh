#!/bin/sh
# The code generators depend on one another in one direction only (issue
# 22): no include cycle in codegen/, between its directories or between its
# files, and the two C-like dialects, codegen/cuda and codegen/metal, share
# codegen/cstyle but never include each other.
# Usage: codegen_includes.sh REPO_ROOT
cd "$1" || exit 2
# "includer included" pairs of files, from #include "codegen/..." lines
edges=$(find codegen -type f \( -name '*.c' -o -name '*.h' -o -name '*.cuh' -o -name '*.metal' \) | sort |
        while read -r f; do
          sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(codegen\/[^"]*\)".*/\1/p' "$f" |
            while read -r inc; do echo "$f $inc"; done
        done)
status=0
dirs=$(printf '%s\n' "$edges" | awk 'NF == 2 { a = $1; b = $2; sub(/\/[^\/]*$/, "", a); sub(/\/[^\/]*$/, "", b);
                                              if (a != b) print a, b }' | sort -u)
cross=$(printf '%s\n' "$dirs" | grep -E '^codegen/cuda codegen/metal$|^codegen/metal codegen/cuda$')
if [ -n "$cross" ]; then
  echo "codegen/cuda and codegen/metal include each other's files; share through codegen/cstyle instead:"
  printf '%s\n' "$edges" | grep -E '^codegen/cuda/[^ ]* codegen/metal/|^codegen/metal/[^ ]* codegen/cuda/'
  status=1
fi
# tsort names the members of a cycle on stderr
for level in directories files; do
  if [ $level = directories ]; then pairs=$dirs; else pairs=$edges; fi
  loop=$(printf '%s\n' "$pairs" | grep -v '^$' | tsort 2>&1 >/dev/null)
  if [ -n "$loop" ]; then
    echo "an include cycle between codegen's $level:"
    printf '%s\n' "$loop"
    status=1
  fi
done
[ $status = 0 ] && echo "ok: codegen/ has no include cycle, and cuda/ and metal/ include only cstyle/ of each other's kind"
exit $status
