#!/usr/bin/python3
"""Runs one bad-input test: `mlc compile ARGS tests/diag/NAME.mdl` from the
repository root, and checks its exit status and its standard error exactly.

    run_diag.py [--update] MLC ROOT NAME

tests/diag/NAME.expect holds what the run must give:

    # args: EXTRA ARGS          (split like a shell would; may be empty)
    # exit: N
    ...the exact standard error, to the end of the file...

The model path is appended after the extra arguments, relative to ROOT, so
the paths in the diagnostics do not depend on where the build is.  On a
mismatch the script prints a unified diff and exits 1.

--update rewrites NAME.expect from the actual run (keeping its args line).
It is for maintainers who changed a diagnostic on purpose: read every new
expected output before committing it; a test that merely records what the
compiler happens to print checks nothing.
"""
import difflib
import os
import shlex
import subprocess
import sys

TIMEOUT_S = 10


def parse_expect(path):
    with open(path, 'rb') as f:
        data = f.read()
    lines = data.split(b'\n', 2)
    if len(lines) < 2 or not lines[0].startswith(b'# args:') or not lines[1].startswith(b'# exit:'):
        sys.exit('%s: the first two lines must be "# args: ..." and "# exit: N"' % path)
    args = shlex.split(lines[0][len(b'# args:'):].decode())
    try:
        code = int(lines[1][len(b'# exit:'):].strip())
    except ValueError:
        sys.exit('%s: bad "# exit:" line' % path)
    return lines[0], args, code, lines[2] if len(lines) > 2 else b''


def main(argv):
    update = '--update' in argv
    argv = [a for a in argv if a != '--update']
    if len(argv) != 3:
        sys.exit(__doc__)
    mlc, root, name = argv
    mlc = os.path.abspath(mlc)
    expect_path = os.path.join(root, 'tests', 'diag', name + '.expect')
    args_line, args, want_code, want_err = parse_expect(expect_path)

    cmd = [mlc, 'compile'] + args + ['tests/diag/%s.mdl' % name]
    env = dict(os.environ, LC_ALL='C')  # strerror() texts in English
    try:
        r = subprocess.run(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print('FAIL %s: mlc did not finish in %d s: %s' % (name, TIMEOUT_S, shlex.join(cmd)))
        return 1
    code, err = r.returncode, r.stderr

    if update:
        if code < 0:
            print('not updating %s: mlc was killed by signal %d' % (name, -code))
            return 1
        with open(expect_path, 'wb') as f:
            f.write(args_line + b'\n' + b'# exit: %d\n' % code + err)
        print('updated %s (exit %d); now read it and make sure it is right' % (expect_path, code))
        return 0

    if code == want_code and err == want_err:
        return 0
    print('FAIL %s: %s' % (name, shlex.join(cmd)))
    if code < 0:
        print('mlc was killed by signal %d' % -code)
    elif code != want_code:
        print('exit status %d, expected %d' % (code, want_code))
    if err != want_err:
        diff = difflib.unified_diff(want_err.decode(errors='replace').splitlines(keepends=True),
                                    err.decode(errors='replace').splitlines(keepends=True),
                                    'expected stderr (%s.expect)' % name, 'actual stderr')
        for line in diff:
            sys.stdout.write(line if line.endswith('\n') else line + '\n\\ No newline at end of file\n')
    if r.stdout:
        print('(standard output was:)')
        sys.stdout.write(r.stdout.decode(errors='replace')[:4000])
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
