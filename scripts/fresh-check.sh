#!/usr/bin/env bash
# What a new user gets: a clean clone of this checkout's HEAD in a new
# folder, an empty mlc cache (XDG_CACHE_HOME points at a new, empty
# folder, so nothing of ~/.cache/mlc is reused), the README's two commands,
# and the closing line of the second.  Uncommitted changes are not in the
# clone: commit first.  Exits with scripts/test.sh's status.
#   scripts/fresh-check.sh [WORKDIR]     (default: a new folder under /tmp)
# MLC_TEST_QUICK=1 is passed through (the normal build only).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/mlc-fresh.XXXXXX)}
mkdir -p "$work"
[ -z "$(ls -A "$work")" ] || { echo "fresh-check: $work is not empty" >&2; exit 2; }
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
  echo "fresh-check: note: uncommitted changes in $src are not checked" >&2
fi
echo "fresh-check: $(git -C "$src" rev-parse --short HEAD) cloned into $work/mlc, cache $work/cache"
git clone -q "$src" "$work/mlc"
mkdir -p "$work/cache"
cd "$work/mlc"
export XDG_CACHE_HOME=$work/cache
scripts/setup.sh > "$work/setup.log" 2>&1 || { echo "fresh-check: scripts/setup.sh failed:"; tail -30 "$work/setup.log"; exit 1; }
echo "fresh-check: setup done ($work/setup.log)"
scripts/test.sh 2>&1 | tee "$work/test.log"
exit "${PIPESTATUS[0]}"
