"""Checkpoints of `mlc train`:
  1. 20 steps in one run and 10 + 10 steps with a checkpoint between them
     give byte-identical checkpoints and the same losses;
  2. a process killed with SIGKILL while it writes a checkpoint leaves the
     previous checkpoint intact and loadable;
  3. a corrupt or truncated checkpoint is refused with a clear error.

Usage: checkpoint_check.py MLC MODEL.mdl WORKDIR"""
import glob
import os
import re
import signal
import subprocess
import sys
import time

import torch

from models import Checks, MiniLLM, write_safetensors

SMALL = ["vocab=512", "dim=128", "layers=2", "heads=4", "batch=2", "seq=64"]
check = Checks()


def train(mlc, model, defines, *args):
    r = subprocess.run([mlc, "train", model, "--target", "cpu", *defines, *args], capture_output=True, text=True)
    return r.returncode, re.findall(r"step (\d+): loss (\S+)", r.stdout), r.stderr.strip()


def main():
    mlc, model, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    for f in glob.glob(os.path.join(work, "*")):
        os.remove(f)
    torch.manual_seed(0)
    weights = os.path.join(work, "init.safetensors")
    write_safetensors(weights, {k: v.detach() for k, v in MiniLLM(512, 128, 2, 4).state_dict().items()}, {"format": "pt"})
    data = os.path.join(work, "tokens.u16")
    torch.randint(0, 512, (20 * 128 + 1,), dtype=torch.int32).numpy().astype("uint16").tofile(data)
    common = ["--weights", weights, "--data", data]

    # 1. resume is bit-identical
    a, b10, b20 = (os.path.join(work, n) for n in ("a20.ckpt", "b10.ckpt", "b20.ckpt"))
    rc1, la, err = train(mlc, model, SMALL, *common, "--steps", "20", "--save", a)
    rc2, lb1, _ = train(mlc, model, SMALL, *common, "--steps", "10", "--save", b10)
    rc3, lb2, _ = train(mlc, model, SMALL, "--data", data, "--resume", b10, "--steps", "10", "--save", b20)
    check(rc1 == rc2 == rc3 == 0 and len(la) == 20, f"three training runs succeed ({err[-200:]})")
    check(la == lb1 + lb2, "losses of 20 steps equal those of 10 + 10 steps with a checkpoint between")
    check(open(a, "rb").read() == open(b20, "rb").read(), "the two step-20 checkpoints are byte-identical")
    check([s for s, _ in lb2] == [str(i) for i in range(11, 21)], "the resumed run counts steps 11 to 20")

    # 2. SIGKILL during a save leaves the old checkpoint intact.  A wider model
    # makes the save long enough to catch: watch for the temporary file.
    big = ["vocab=32000", "dim=1024", "layers=1", "heads=8", "batch=1", "seq=16"]
    old = os.path.join(work, "big.ckpt")
    rc, _, err = train(mlc, model, big, "--steps", "1", "--save", old)
    check(rc == 0, f"a first checkpoint of the wide model is written ({err[-200:]})")
    before = open(old, "rb").read()
    killed = False
    for attempt in range(5):
        p = subprocess.Popen([mlc, "train", model, "--target", "cpu", *big, "--resume", old, "--steps", "1", "--save", old],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None:
            if glob.glob(old + ".tmp.*"):
                os.kill(p.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.0005)
        p.wait()
        if killed:
            break
    check(killed, "a run was killed while its checkpoint was being written")
    check(open(old, "rb").read() == before, "the previous checkpoint is byte for byte what it was")
    rc, losses, err = train(mlc, model, big, "--resume", old, "--steps", "1")
    check(rc == 0 and losses and losses[0][0] == "2", f"and it loads and trains on ({err[-200:]})")
    for f in glob.glob(old + ".tmp.*"):
        os.remove(f)

    # 3. corrupt and truncated checkpoints are refused
    blob = bytearray(open(b10, "rb").read())
    blob[-1000] ^= 0x55
    bad = os.path.join(work, "corrupt.ckpt")
    open(bad, "wb").write(blob)
    rc, _, err = train(mlc, model, SMALL, "--resume", bad, "--steps", "1")
    check(rc == 1 and err.endswith("corrupt.ckpt: checksum mismatch: the checkpoint is corrupt"), f"corrupt: {err}")
    cut = os.path.join(work, "truncated.ckpt")
    open(cut, "wb").write(open(b10, "rb").read()[:-4096])
    rc, _, err = train(mlc, model, SMALL, "--resume", cut, "--steps", "1")
    check(rc == 1 and "truncated.ckpt" in err, f"truncated: {err}")
    rc, _, err = train(mlc, model, SMALL, "--resume", weights, "--steps", "1")
    check(rc == 1 and "not an mlc checkpoint" in err, f"a plain weights file: {err}")
    sys.exit(check.finish())


if __name__ == "__main__":
    main()
