"""
PyTorch's fused attention on the attention labs' benchmark shapes, in the labs' units: the peer of
`build/lab_attention_forward --bench` and `build/lab_attention_backward --bench`.

  python3 dev/cuda/sdpa_bench.py [--reps N] [--long]

torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) in bf16, with q, k, v the
head views of one (B, T, 3C) projection output (nanoGPT's layout, the labs' standard layout), at
H = 12, hd = 64: B = 8 at T = 1024, 2048, 4096, then B = 64 at T = 1024 (d12's micro-step); with --long,
the labs' --long grid instead (issue 59's bar): B = 8, T = 1024 to 16384, hd = 64 and 128. Timed:
forward; backward alone (autograd.grad of the forward's output into the (B, T, 3C) tensor, the
forward's graph kept); forward + backward. Each the
median of N runs (default 25, 10 with --long) after two warm-ups, the L2 cache flushed (a memset of twice its size)
before each run, CUDA events around the run only: the labs' method. Backends: PyTorch's own choice
("sdpa"), then each of flash and cuDNN forced where this PyTorch has it ("sdpa_flash", "sdpa_cudnn").

FLOPs and bytes are the labs' (dev/cuda/attention_forward.cu, attention_backward.cu): forward
2 B H T^2 hd (causal), backward 2.5x, forward + backward 3.5x; bytes: q, k, v, O (bf16) and lse (fp32)
once for the forward, plus dO, dq, dk, dv for the backward, their sum for forward + backward.

Prints "bench <name> <pass> T=.. B=.. H=.. hd=.. ms=.. TFLOP/s=.. GB/s=.." lines, the labs' format.
Without PyTorch or a CUDA device: one SKIP line, exit 0. Needs no network.
"""

import argparse
import sys

H = 12
SHAPES = ((8, 1024, 64), (8, 2048, 64), (8, 4096, 64), (64, 1024, 64))  # (B, T, hd): the labs' lab_bench_shapes
LONG_SHAPES = tuple((8, T, hd) for hd in (64, 128) for T in (1024, 2048, 4096, 8192, 16384))  # lab_bench_long_shapes


def flops_forward(B, T, hd):
    return 2.0 * B * H * T * T * hd


def bytes_forward(B, T, hd):
    return 2.0 * B * T * hd * (2 * H + 2 * H) + 4.0 * B * H * T


def bytes_backward(B, T, hd):
    return bytes_forward(B, T, hd) + 2.0 * B * T * hd * (2 * H + 2 * H)


def main():
    ap = argparse.ArgumentParser(description="PyTorch SDPA on the attention labs' benchmark shapes")
    ap.add_argument("--reps", type=int, default=None, help="timed runs per measurement, the median is printed (default 25, 10 with --long)")
    ap.add_argument("--long", action="store_true", help="the labs' --long grid: B 8, T 1024 to 16384, hd 64 and 128")
    args = ap.parse_args()
    if args.reps is None:
        args.reps = 10 if args.long else 25
    if args.reps < 1:
        print(f"error: sdpa_bench: --reps {args.reps}: expected an integer >= 1", file=sys.stderr)
        return 1
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # no PyTorch here
        print(f"SKIP sdpa_bench: PyTorch not importable ({type(e).__name__}: {e})")
        return 0
    if not torch.cuda.is_available():
        print(f"SKIP sdpa_bench: no CUDA device (torch {torch.__version__}: torch.cuda.is_available() is False)")
        return 0

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    l2 = getattr(props, "L2_cache_size", 50 << 20) or (50 << 20)
    flush = torch.empty(2 * l2, dtype=torch.uint8, device=dev)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def median_ms(fn, reps):
        for _ in range(2):
            fn()
        torch.cuda.synchronize()
        ms = []
        for i in range(reps):
            flush.fill_(i & 0xFF)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            ms.append(start.elapsed_time(stop))
        ms.sort()
        n = len(ms)
        return ms[n // 2] if n % 2 else 0.5 * (ms[n // 2 - 1] + ms[n // 2])

    def line(name, what, B, T, HD, ms, flops, nbytes):
        print(f"bench {name} {what:<16} T={T} B={B} H={H} hd={HD} ms={ms:.4f} "
              f"TFLOP/s={flops / (ms * 1e-3) / 1e12:.1f} GB/s={nbytes / (ms * 1e-3) / 1e9:.1f}", flush=True)

    # the backends: PyTorch's choice, then forced ones where this version has the selector
    backends = [("sdpa", None)]
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        for name, attr in (("sdpa_flash", "FLASH_ATTENTION"), ("sdpa_cudnn", "CUDNN_ATTENTION")):
            if hasattr(SDPBackend, attr):
                backends.append((name, getattr(SDPBackend, attr)))
    except Exception:
        sdpa_kernel = None

    shapes = LONG_SHAPES if args.long else SHAPES
    print(f"sdpa_bench: torch {torch.__version__} on {props.name}; (B, T, hd) {shapes}, H={H}, bf16, q, k, v head views of "
          f"qkv (B, T, 3C), is_causal=True, median of {args.reps} runs, L2 ({l2 >> 20} MiB) flushed before each")
    for B, T, HD in shapes:
        C = H * HD
        gen = torch.Generator(device=dev).manual_seed(1337 + T)
        qkv = torch.randn(B, T, 3 * C, device=dev, dtype=torch.bfloat16, generator=gen).requires_grad_(True)
        dout = torch.randn(B, H, T, HD, device=dev, dtype=torch.bfloat16, generator=gen)

        def attend():
            q, k, v = qkv.split(C, dim=2)
            q = q.view(B, T, H, HD).transpose(1, 2)  # (B, H, T, hd)
            k = k.view(B, T, H, HD).transpose(1, 2)
            v = v.view(B, T, H, HD).transpose(1, 2)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        f_fwd = flops_forward(B, T, HD)
        f_bwd = 2.5 * f_fwd
        b_fwd, b_bwd = bytes_forward(B, T, HD), bytes_backward(B, T, HD)
        for name, backend in backends:
            ctx = sdpa_kernel(backend) if backend is not None else None
            try:
                if ctx is not None:
                    ctx.__enter__()
                with torch.no_grad():
                    ms = median_ms(attend, args.reps)
                line(name, "forward", B, T, HD, ms, f_fwd, b_fwd)
                out = attend()
                ms = median_ms(lambda: torch.autograd.grad(out, (qkv,), dout, retain_graph=True), args.reps)
                line(name, "backward", B, T, HD, ms, f_bwd, b_bwd)
                out = None  # frees the kept graph before the next measurement
                ms = median_ms(lambda: torch.autograd.grad(attend(), (qkv,), dout), args.reps)
                line(name, "forward+backward", B, T, HD, ms, f_fwd + f_bwd, b_fwd + b_bwd)
            except Exception as e:  # a forced backend this GPU or build does not have
                print(f"bench {name} T={T} B={B} hd={HD}: not available ({type(e).__name__}: {str(e).splitlines()[0][:120]})", flush=True)
            finally:
                if ctx is not None:
                    ctx.__exit__(None, None, None)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
