#!/usr/bin/env python3
"""PyTorch FSDP2 reference for mlc's cuda-nccl target: the MiniLLM of
torch_baseline.py (nn.RMSNorm, nn.MultiheadAttention), fully_shard on each
block and on the root with MixedPrecisionPolicy(bf16, f32) and AdamW(lr
3e-4), trained from a safetensors file and a token file exactly as `mlc
train --data` reads it: at step s, rank r takes the window ((s * world + r)
mod windows) * batch * seq of the file (tokens, then targets one further).

  python3 fsdp_torch.py init  --yardstick DIR --work DIR --steps N [cfg]   weights + tokens
  torchrun --nproc_per_node=W fsdp_torch.py train --yardstick DIR --work DIR --steps N [cfg]

Rank 0 prints 'step k: loss X (T ms)' (the mean loss over the ranks) and
the peak memory of its GPU."""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def args_():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["init", "train"])
    p.add_argument("--yardstick", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--steps", type=int, default=10)
    for k, v in dict(vocab=32000, dim=2048, layers=12, heads=16, batch=8, seq=1024).items():
        p.add_argument("--" + k, type=int, default=v)
    return p.parse_args()


def model(a):
    sys.path.insert(0, a.yardstick)
    from torch_baseline import MiniLLM, TransformerBlock  # noqa: E402
    m = MiniLLM(a.vocab, a.dim, a.layers)
    if a.heads != 16 or a.dim != 2048:
        m.layers = torch.nn.ModuleList([TransformerBlock(a.dim, a.heads) for _ in range(a.layers)])
    return m


def main():
    a = args_()
    from safetensors.torch import load_file, save_file
    wpath, dpath = os.path.join(a.work, "init.safetensors"), os.path.join(a.work, "tokens.i32")
    if a.mode == "init":
        os.makedirs(a.work, exist_ok=True)
        torch.manual_seed(0)
        m = model(a)
        save_file({k: v.detach().contiguous() for k, v in m.state_dict().items()}, wpath, {"format": "pt"})
        rng = np.random.default_rng(0)
        rng.integers(0, a.vocab, 2 * a.steps * a.batch * a.seq * 8 + 1, dtype=np.int32).tofile(dpath)
        print("wrote", wpath, "and", dpath)
        return 0
    from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
    import torch.distributed as dist
    dist.init_process_group(backend="nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    m = model(a)
    m.load_state_dict(load_file(wpath))
    m = m.to(dev)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in m.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(m, mp_policy=mp)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    data = torch.from_numpy(np.fromfile(dpath, dtype=np.int32))
    B, S = a.batch, a.seq
    windows = (data.numel() - 1) // (B * S)
    torch.cuda.reset_peak_memory_stats(dev)
    times = []
    for s in range(a.steps):
        p = ((s * world + rank) % windows) * B * S
        w = data[p: p + B * S + 1].long().to(dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = m(w[:-1].view(B, S))
        loss = F.cross_entropy(logits.view(-1, a.vocab), w[1:].reshape(-1))
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        times.append(ms)
        l = loss.detach().float()
        dist.all_reduce(l)
        if rank == 0:
            print("step %d: loss %.6f (%.1f ms)" % (s + 1, l.item() / world, ms), flush=True)
    if rank == 0:
        med = statistics.median(times[2:]) if len(times) > 3 else times[-1]
        print("torch fsdp2: %d ranks, median step %.1f ms over steps 3..%d, %.0f tok/s per GPU, peak %.2f GB on rank 0" % (
            world, med, a.steps, B * S / med * 1e3, torch.cuda.max_memory_allocated(dev) / 1e9), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
