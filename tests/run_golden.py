"""Golden-output test: runs a command from the repository root and compares
its standard output byte for byte with a file.

Usage: run_golden.py ROOT EXPECTED_FILE [--update] -- COMMAND ARGS...
With --update, rewrites EXPECTED_FILE instead (review the diff before committing).
"""
import difflib
import subprocess
import sys


def main():
    sep = sys.argv.index("--")
    root, expected = sys.argv[1], sys.argv[2]
    update = "--update" in sys.argv[3:sep]
    cmd = sys.argv[sep + 1:]
    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        sys.exit(f"command failed with exit code {r.returncode}: {' '.join(cmd)}\n{r.stderr}")
    if update:
        with open(expected, "w") as f:
            f.write(r.stdout)
        return
    with open(expected) as f:
        want = f.read()
    if r.stdout != want:
        sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), r.stdout.splitlines(True),
                                                   expected, "actual"))
        sys.exit(1)


if __name__ == "__main__":
    main()
