#!/bin/sh
# The driver and the passes have no branch per target (issue 22): the grep
# below, the issue's own, finds target names only in the registry,
# driver/target.c.  A target's own file, driver/target_<name>.c, may spell
# its tools' names (xcrun's "metal"), but never compares a target name.
# Usage: target_names.sh REPO_ROOT
cd "$1" || exit 2
hits=$(grep -rn 'strcmp.*"cuda\|"spirv\|"metal\|"cpu"' driver/ passes/)
bad=$(printf '%s\n' "$hits" | grep -v '^$' | grep -v '^driver/target\.c:' |
      awk -F: '!($1 ~ /^driver\/target_[a-z]+\.c$/ && $0 !~ /strcmp/)')
if [ -n "$bad" ]; then
  echo "target names outside the registry (driver/target.c); ask the descriptor (driver/target.h) instead:"
  printf '%s\n' "$bad"
  exit 1
fi
echo "ok: target names only in driver/target.c (and tool names in driver/target_<name>.c)"
