#!/usr/bin/env python3
"""`mlc devices`: the shape of its output, on any machine.

Without --target, every runtime driver (runtime/registry.c) in order: a
line per device, "DRIVER N: NAME, X.Y GB memory, DETAIL", or one line
"DRIVER: why not" (no driver library, not built).  The CPU is always there,
with its x86-64 level and features.  With --target, one driver; a target's
name stands for its driver (spirv: vulkan); an unknown name is a usage
error (2), a driver that is not available here exit status 4.

Usage: devices.py MLC
"""
import re
import subprocess
import sys

DRIVERS = ["cpu", "cuda", "vulkan", "metal"]
DEVICE = re.compile(r"^(\w+) (\d+): (.+), (\d+\.\d GB memory|memory unknown), (.+)$")
REASON = re.compile(r"^(\w+): (.+)$")
CPU = re.compile(r"^cpu 0: .+, \d+\.\d GB memory, "
                 r"(x86-64(-v[234])?:( [a-z0-9.-]+)*|aarch64|not x86-64); \d+ CPUs online$")


def run(mlc, *args):
    p = subprocess.run([mlc, "devices", *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout.splitlines(), p.stderr


def check(ok, what):
    if not ok:
        print("FAIL:", what)
        sys.exit(1)


def main():
    mlc = sys.argv[1]
    rc, lines, err = run(mlc)
    check(rc == 0, f"mlc devices: exit {rc}: {err}")
    seen = []
    for line in lines:
        m = DEVICE.match(line) or REASON.match(line)
        check(m, f"a line of neither shape: {line!r}")
        seen.append(m.group(1))
        if m.re is DEVICE and seen[-1] == "cpu":
            check(CPU.match(line), f"the CPU's line: {line!r}")
    order = [d for i, d in enumerate(seen) if i == 0 or seen[i - 1] != d]
    check(order == DRIVERS, f"drivers {order}, expected each of {DRIVERS} once, in order")
    cpu = [line for line in lines if line.startswith("cpu")]
    check(len(cpu) == 1 and CPU.match(cpu[0]), f"one CPU device line, got {cpu}")

    # one driver: the same lines as in the whole list
    rc, only, err = run(mlc, "--target", "cpu")
    check(rc == 0 and only == cpu, f"--target cpu: exit {rc}, {only}")
    for target, driver in (("spirv", "vulkan"), ("vulkan", "vulkan"), ("cuda", "cuda"), ("cuda-nccl", "cuda"),
                           ("metal", "metal")):
        rc, out, err = run(mlc, "--target", target)
        mine = [line for line in lines if line.split(" ")[0].rstrip(":") == driver]
        if rc == 0:
            check(out == mine, f"--target {target}: {out}, expected {mine}")
        else:
            # not available here: the reason, on standard error, is the listing's
            check(rc == 4 and out == [], f"--target {target}: exit {rc}, {out}")
            check(len(mine) == 1 and REASON.match(mine[0]), f"--target {target} failed but the list has {mine}")
            why = mine[0].split(": ", 1)[1].removeprefix("not built: ")
            check(why in err, f"--target {target}: {err!r} does not give the listing's reason {why!r}")
    rc, out, err = run(mlc, "--target", "hip")
    check(rc == 2 and "expected a target (cpu, cuda, cuda-nccl, spirv or metal) or a runtime driver "
          "(cpu, cuda, vulkan or metal)" in err, f"--target hip: exit {rc}: {err!r}")
    rc, out, err = run(mlc, "--bogus")
    check(rc == 2 and "devices does not take '--bogus'" in err, f"--bogus: exit {rc}: {err!r}")
    print(f"ok: {len(lines)} lines, every driver, the CPU as {cpu[0].split(', ')[-1]!r}")


if __name__ == "__main__":
    main()
