"""
The PyTorch peer of the side-by-side benchmark: a plain GPT-2 (nanoGPT's shape: pre-LayerNorm
blocks, fused QKV linear, tanh GELU, tied LM head, vocabulary padded to 50304) trained the way a
careful PyTorch user would: bf16 autocast, F.scaled_dot_product_attention (flash attention),
torch.compile, fused AdamW, gradient accumulation to the same tokens per step as our trainer.
Not a test: it needs a CUDA GPU and PyTorch 2.x.

  python3 dev/bench/bench_torch.py --shard build/bench/bench_train_000.bin -e d12 -b 32 -t 1024 \
      -d 524288 -x 12

Prints one progress line per step and a final line our benchmark parses:

  summary: N timed steps | X ms/step | Y tok/s | MFU Z% | peak memory W MiB | params P

The summary is the mean over the steps after the first two (compilation and autotuning). MFU is
llm.c's formula: (6 N + 6 L C T) FLOPs per token (N every parameter, embeddings included) over
the dense bf16 rate given by --peak_tflops (790: measured on the device's H100s).
"""

import argparse
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEPTHS = {"d12": (12, 768, 12), "d24": (24, 1024, 16), "d36": (36, 1280, 20), "d48": (48, 1600, 25)}
PADDED_VOCAB = 50304
SHARD_MAGIC = 20240520


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.H, C // self.H).transpose(1, 2)  # (B, H, T, hd)
        k = k.view(B, T, self.H, C // self.H).transpose(1, 2)
        v = v.view(B, T, self.H, C // self.H).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, H, max_T):
        super().__init__()
        self.wte = nn.Embedding(PADDED_VOCAB, C)
        self.wpe = nn.Embedding(max_T, C)
        self.blocks = nn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        # GPT-2's init: N(0, 0.02), residual projections scaled by 1/sqrt(2L)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head, (B, T, PADDED_VOCAB)
        return F.cross_entropy(logits.float().view(-1, PADDED_VOCAB), targets.view(-1))


def read_shard(path):
    header = np.fromfile(path, dtype=np.int32, count=256)
    if header.size != 256 or header[0] != SHARD_MAGIC:
        sys.exit(f"bench_torch: {path}: not a token shard (expected magic {SHARD_MAGIC} in a 1024-byte header)")
    tokens = np.fromfile(path, dtype=np.uint16, offset=1024)
    if tokens.size != header[2]:
        sys.exit(f"bench_torch: {path}: header says {header[2]} tokens, file holds {tokens.size}")
    return torch.from_numpy(tokens.astype(np.int64))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shard", required=True, help="llm.c token shard (uint16 ids after a 1024-byte header)")
    ap.add_argument("-e", default="d12", choices=sorted(DEPTHS), help="model depth (default d12)")
    ap.add_argument("-b", type=int, default=32, help="micro-batch size (default 32)")
    ap.add_argument("-t", type=int, default=1024, help="sequence length (default 1024)")
    ap.add_argument("-d", type=int, default=524288, help="tokens per step, a multiple of b*t (default 524288)")
    ap.add_argument("-x", type=int, default=12, help="steps, >= 4 (default 12)")
    ap.add_argument("--peak_tflops", type=float, default=790.0, help="dense bf16 TFLOP/s for MFU (default 790)")
    ap.add_argument("--no_compile", action="store_true", help="eager mode (for a quick check)")
    args = ap.parse_args()
    if args.b < 1 or args.t < 1 or args.d % (args.b * args.t) != 0:
        sys.exit(f"bench_torch: -d {args.d}: expected a positive multiple of -b * -t = {args.b * args.t}")
    if args.x < 4:
        sys.exit(f"bench_torch: -x {args.x}: expected >= 4 (the first two steps are not timed)")
    if not torch.cuda.is_available():
        sys.exit("bench_torch: no CUDA device (torch.cuda.is_available() is False)")

    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    L, C, H = DEPTHS[args.e]
    B, T = args.b, args.t
    accum = args.d // (B * T)
    tokens = read_shard(args.shard)
    need = args.x * args.d + 1
    if tokens.numel() < need:
        sys.exit(f"bench_torch: {args.shard}: {tokens.numel()} tokens, {need} needed for {args.x} steps of {args.d}")
    tokens = tokens[:need].cuda()

    model = GPT(L, C, H, max(T, 1024)).cuda()
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = model if args.no_compile else torch.compile(model)
    flops_per_token = 6 * n_params + 6 * L * C * T
    print(f"device: {torch.cuda.get_device_name()} | torch {torch.__version__} | compile {not args.no_compile}")
    print(f"model: {args.e} | {n_params} parameters | B {B} T {T} | {args.d} tokens per step | {accum} micro-steps")

    torch.cuda.reset_peak_memory_stats()
    times = []
    pos = 0
    for step in range(args.x):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(accum):
            chunk = tokens[pos: pos + B * T + 1]
            pos += B * T
            x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = step_model(x, y)
            (loss / accum).backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        times.append(dt)
        print(f"step {step + 1}/{args.x} | loss {loss.item():.6f} | norm {norm.item():.4f} | {dt * 1e3:.2f} ms | "
              f"{args.d / dt:.0f} tok/s", flush=True)
    timed = times[2:]
    dt = sum(timed) / len(timed)
    tok_s = args.d / dt
    mfu = 100.0 * flops_per_token * tok_s / (args.peak_tflops * 1e12)
    peak = torch.cuda.max_memory_reserved() / 2**20
    print(f"summary: {len(timed)} timed steps | {dt * 1e3:.2f} ms/step | {tok_s:.0f} tok/s | MFU {mfu:.2f}% | "
          f"peak memory {peak:.0f} MiB | params {n_params}")


if __name__ == "__main__":
    main()
