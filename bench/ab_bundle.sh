#!/usr/bin/env bash
# Builds of other commits for an A/B on the GPU machine, packed to fit the
# device tool's 64 MiB: for each NAME=COMMIT, the files that differ between
# HEAD and COMMIT under codegen/, runtime/, ir/, passes/, frontend/ and
# driver/ are checked out at COMMIT into this tree, build-gpu's mlc is
# rebuilt (ninja, incremental: a few seconds where only kernels' headers
# differ) and stripped into build-gpu/NAME/mlc (and its op checker,
# build-gpu/NAME/mlc_opcheck, whose op cases attnab runs); the tree is put back and
# build-gpu/mlc rebuilt at HEAD.  Then build-gpu/ab.tar.xz holds them all
# (xz shares what the builds have in common: six builds were 2.2 MB), for
# bench/gpu_s37.sh's attnab part (AB="NAME ...").
#   bench/ab_bundle.sh base=55eddf3 v1=d59172d v2=eb3fb47
# Needs build-gpu configured as bench/gpu_s37.sh's header says, and a clean
# tree under those folders (it refuses otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
dirs="codegen runtime ir passes frontend driver"
[ $# -gt 0 ] || { sed -n '2,15p' "$0"; exit 2; }
if ! git diff --quiet HEAD -- $dirs; then echo "ab_bundle.sh: uncommitted changes under $dirs; commit or stash them first" >&2; exit 1; fi
names=()
extra="" # files of the commit being built that HEAD lacks: removed again with the rest
restore() { git checkout -q HEAD -- $dirs; [ -z "$extra" ] || rm -f $extra; }
trap restore EXIT
for a in "$@"; do
  name=${a%%=*} rev=${a#*=}
  [[ $name =~ ^[A-Za-z0-9_-]+$ && $a == *=* ]] || { echo "ab_bundle.sh: $a: expected NAME=COMMIT" >&2; exit 2; }
  git rev-parse -q --verify "$rev^{commit}" > /dev/null || { echo "ab_bundle.sh: $rev: no such commit" >&2; exit 2; }
  restore
  files=$(git diff --name-only HEAD "$rev" -- $dirs)
  gone=$(git diff --name-only --diff-filter=A "$rev" HEAD -- $dirs) # in HEAD, not in $rev
  [ -z "$gone" ] || { echo "ab_bundle.sh: $name: files that $rev lacks ($gone): build it in a worktree instead" >&2; exit 1; }
  extra=$(git diff --name-only --diff-filter=A HEAD "$rev" -- $dirs)
  [ -z "$files" ] || git checkout -q "$rev" -- $files
  nice ninja -C build-gpu mlc codegen/cuda/mlc_opcheck > /tmp/ab_bundle-$name.log 2>&1 ||
    { echo "ab_bundle.sh: $name: build failed (/tmp/ab_bundle-$name.log)" >&2; exit 1; }
  mkdir -p build-gpu/$name
  strip -o build-gpu/$name/mlc build-gpu/mlc
  strip -o build-gpu/$name/mlc_opcheck build-gpu/codegen/cuda/mlc_opcheck
  echo "$name: $rev ($(echo $files | wc -w) files differ from HEAD) -> build-gpu/$name/mlc, mlc_opcheck"
  names+=("$name/mlc" "$name/mlc_opcheck")
done
restore
trap - EXIT
nice ninja -C build-gpu > /dev/null
strip build-gpu/mlc build-gpu/codegen/cuda/mlc_opcheck
(cd build-gpu && tar -cJf ab.tar.xz "${names[@]}")
echo "build-gpu/ab.tar.xz: $(du -h build-gpu/ab.tar.xz | cut -f1) (${names[*]}); build-gpu/mlc and mlc_opcheck at HEAD"
