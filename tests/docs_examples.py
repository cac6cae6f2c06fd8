#!/usr/bin/python3
"""Compiles every example of a document that is fenced as ````mdl (four
backquotes and `mdl`): each must compile with `mlc compile` for the CPU.

    docs_examples.py MLC DOC.md WORKDIR

Exit status 1 if any example fails to compile, or if the document has none.
"""
import os
import re
import subprocess
import sys


def main():
    mlc, doc, work = sys.argv[1:4]
    text = open(doc).read()
    blocks = re.findall(r"^````mdl\n(.*?)^````$", text, re.S | re.M)
    os.makedirs(work, exist_ok=True)
    failed = 0
    for k, src in enumerate(blocks):
        path = os.path.join(work, "example%d.mdl" % k)
        with open(path, "w") as f:
            f.write(src)
        r = subprocess.run([mlc, "compile", path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ok = r.returncode == 0
        failed += not ok
        print("%s example %d of %s%s" % ("ok  " if ok else "FAIL", k, doc, "" if ok else ":\n" + r.stderr))
    if not blocks:
        print("no ````mdl examples in %s" % doc)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
