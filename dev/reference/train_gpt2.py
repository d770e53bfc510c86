"""
Reference GPT-2 with a choice of Q/K/V projection scheme, in plain PyTorch.

This is the ground truth the CPU and CUDA trainers are tested against. It is written to be read:
explicit attention (q @ k^T * scale, causal mask, softmax, @ v), explicit LayerNorm and GELU,
AdamW written out by hand. It mirrors, name for name, ../../attention_variants.cuh (the schemes,
the config check and its messages, the fused projection layout, the parameter tensors and their
decay flags) and ../FORMATS.md (checkpoints, debug-state file, model math, AdamW step).
The specification of the schemes is ../SCHEMES.md.

Runs on torch 1.13 (CPU) and torch 2.x (CUDA). Examples:

  # build a tiny model, write its checkpoint and the debug state of a random batch + 10 AdamW steps
  python dev/reference/train_gpt2.py --scheme kv_shared --n_layer 2 --n_embd 64 --n_head 4 \
      --n_kv_head 2 --max_seq_len 64 --vocab 500 --seed 1 \
      --out_model /tmp/m.bin --out_debug /tmp/m_debug.bin --B 4 --T 64
  # read a checkpoint (versions 3, 5, 6, 7) and dump its debug state
  python dev/reference/train_gpt2.py --load /tmp/m.bin --out_debug /tmp/d.bin --B 2 --T 32
  # train a small model on llm.c shards (float32 is plenty here), then save it
  python dev/reference/train_gpt2.py --scheme q_identity --n_layer 4 --n_embd 128 --n_head 4 \
      --max_seq_len 128 --dtype float32 --train_data "dev/data/austen/austen_train_*.bin" \
      --val_data "dev/data/austen/austen_val_*.bin" --train_steps 50 --B 8 --out_model /tmp/q.bin
"""

import argparse
import glob
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

# ----------------------------------------------------------------------------
# The schemes (ids are stored in checkpoints: the order of attention_variants.cuh)

SCHEMES = ["standard", "q_identity", "k_identity", "v_identity",
           "kv_shared", "qk_shared", "qkv_shared", "q_residual"]
STANDARD, Q_IDENTITY, K_IDENTITY, V_IDENTITY, KV_SHARED, QK_SHARED, QKV_SHARED, Q_RESIDUAL = range(8)


def scheme_name(scheme):
    return SCHEMES[scheme] if 0 <= scheme < len(SCHEMES) else "unknown"


class ConfigError(Exception):
    """A bad configuration or input file; its message is one line, printed without a traceback."""


class Config:
    """The model shape: the fields of GPT2Config, all stored in the checkpoint header."""

    def __init__(self, scheme=STANDARD, max_seq_len=1024, vocab_size=50257, padded_vocab_size=50304,
                 num_layers=12, num_heads=12, num_kv_heads=None, channels=768, mlp_hidden=None,
                 use_bias=1, tied_head=1, attn_scale=0.0):
        self.scheme = scheme
        self.max_seq_len = max_seq_len
        self.vocab_size = vocab_size
        self.padded_vocab_size = padded_vocab_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.channels = channels
        self.mlp_hidden = 4 * channels if mlp_hidden is None else mlp_hidden
        self.use_bias = use_bias
        self.tied_head = tied_head
        self.attn_scale = f32(attn_scale)  # the header stores it as float32

    @property
    def head_dim(self):
        return self.channels // self.num_heads

    @property
    def kv_channels(self):
        return self.num_kv_heads * self.head_dim

    def describe(self):
        return ("n_layer=%d n_embd=%d n_head=%d n_kv_head=%d mlp=%d bias=%d tied=%d T=%d V=%d/%d"
                % (self.num_layers, self.channels, self.num_heads, self.num_kv_heads, self.mlp_hidden,
                   self.use_bias, self.tied_head, self.max_seq_len, self.vocab_size, self.padded_vocab_size))


def f32(x):
    """x rounded to float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def config_check(c):
    """gpt2_config_check: raises ConfigError with the C header's message for a forbidden combination."""
    name = scheme_name(c.scheme)
    if not 0 <= c.scheme < len(SCHEMES):
        raise ConfigError("unknown scheme id %d (this build knows ids 0..%d)" % (c.scheme, len(SCHEMES) - 1))
    if (c.num_layers < 1 or c.num_heads < 1 or c.channels < 1 or c.max_seq_len < 1 or
            c.vocab_size < 1 or c.mlp_hidden < 1):
        raise ConfigError("scheme %s: n_layer=%d n_head=%d n_embd=%d T=%d vocab=%d mlp=%d must all be >= 1"
                          % (name, c.num_layers, c.num_heads, c.channels, c.max_seq_len, c.vocab_size,
                             c.mlp_hidden))
    if c.padded_vocab_size < c.vocab_size:
        raise ConfigError("scheme %s: padded vocab %d is smaller than vocab %d"
                          % (name, c.padded_vocab_size, c.vocab_size))
    if c.channels % c.num_heads != 0:
        raise ConfigError("scheme %s: n_embd=%d is not divisible by n_head=%d (heads are n_embd/n_head wide)"
                          % (name, c.channels, c.num_heads))
    if c.num_kv_heads < 1 or c.num_heads % c.num_kv_heads != 0:
        raise ConfigError("scheme %s: n_kv_head=%d must be >= 1 and divide n_head=%d"
                          % (name, c.num_kv_heads, c.num_heads))
    if c.use_bias not in (0, 1):
        raise ConfigError("scheme %s: bias must be 0 or 1, got %d" % (name, c.use_bias))
    if c.tied_head not in (0, 1):
        raise ConfigError("scheme %s: tied must be 0 or 1, got %d" % (name, c.tied_head))
    if not (c.attn_scale >= 0.0) or math.isinf(c.attn_scale):
        raise ConfigError("scheme %s: attention scale must be a finite number >= 0 (0 = default), got %g"
                          % (name, c.attn_scale))
    if c.scheme in (K_IDENTITY, V_IDENTITY, QK_SHARED, QKV_SHARED) and c.num_kv_heads != c.num_heads:
        why = {K_IDENTITY: "k = x has one key head per query head",
               V_IDENTITY: "v = x has one value head per query head"}.get(
            c.scheme, "q and k are one tensor, so they have the same number of heads")
        raise ConfigError("scheme %s requires n_kv_head == n_head, got n_kv_head=%d with n_head=%d (%s)"
                          % (name, c.num_kv_heads, c.num_heads, why))
    if c.scheme == Q_RESIDUAL and c.channels % 2 != 0:
        raise ConfigError("scheme %s requires an even n_embd (W1 maps C to C/2), got n_embd=%d"
                          % (name, c.channels))


# ----------------------------------------------------------------------------
# The fused attention projection: qkvw is (width, C); y = x qkvw^T + qkvb, (B, T, width).
# Each role is a column range of y ("proj", offset, channels), x itself ("input"), or the
# q_residual query ("residual_query"). Two "proj" roles with the same offset are one tensor.

SRC_PROJECTION, SRC_INPUT, SRC_RESIDUAL_QUERY = "proj", "input", "residual_query"


def qkv_layout(c):
    """Returns (width, q, k, v), each role a tuple (source, offset, channels): qkv_layout() of the C header."""
    C, KV = c.channels, c.kv_channels
    P, X = SRC_PROJECTION, SRC_INPUT
    if c.scheme == Q_IDENTITY:
        return 2 * KV, (X, 0, C), (P, 0, KV), (P, KV, KV)
    if c.scheme == K_IDENTITY:  # KV == C
        return 2 * C, (P, 0, C), (X, 0, C), (P, C, C)
    if c.scheme == V_IDENTITY:  # KV == C
        return 2 * C, (P, 0, C), (P, C, C), (X, 0, C)
    if c.scheme == KV_SHARED:
        return C + KV, (P, 0, C), (P, C, KV), (P, C, KV)
    if c.scheme == QK_SHARED:  # KV == C
        return 2 * C, (P, 0, C), (P, 0, C), (P, C, C)
    if c.scheme == QKV_SHARED:  # KV == C
        return C, (P, 0, C), (P, 0, C), (P, 0, C)
    if c.scheme == Q_RESIDUAL:
        return 2 * KV, (SRC_RESIDUAL_QUERY, 0, C), (P, 0, KV), (P, KV, KV)
    return C + 2 * KV, (P, 0, C), (P, C, KV), (P, C + KV, KV)  # standard


def default_attn_scale(scheme, head_dim):
    """qkv_default_attn_scale in float32 arithmetic, like the C header (1.0f / sqrtf(hd), times 0.5f)."""
    s = np.float32(1.0) / np.sqrt(np.float32(head_dim))
    if scheme in (Q_IDENTITY, Q_RESIDUAL):
        s = s * np.float32(0.5)
    return float(s)


def attn_scale(c):
    return c.attn_scale if c.attn_scale > 0.0 else default_attn_scale(c.scheme, c.head_dim)


# ----------------------------------------------------------------------------
# Parameter tensors, in file order (param_tensor_names of the C header), with decay flags and
# the residual-projection init scaling. Absent tensors have shape None.

PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
               "lm_head", "qres_rmsw", "qres_w1", "qres_w2", "qres_lnw"]
PARAM_DECAYED = dict(zip(PARAM_NAMES, [1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0]))
PARAM_RESIDUAL_SCALED = {"attprojw", "fcprojw"}
PARAM_BIASES = {"ln1b", "qkvb", "attprojb", "ln2b", "fcb", "fcprojb", "lnfb"}
PARAM_GAINS = {"ln1w", "ln2w", "lnfw", "qres_rmsw", "qres_lnw"}


def param_shapes(c):
    """fill_param_shapes: name -> shape tuple, or None for a tensor this config does not have."""
    Vp, maxT, C, L, M = c.padded_vocab_size, c.max_seq_len, c.channels, c.num_layers, c.mlp_hidden
    W = qkv_layout(c)[0]
    b, qres = c.use_bias, c.scheme == Q_RESIDUAL
    shapes = {
        "wte": (Vp, C), "wpe": (maxT, C),
        "ln1w": (L, C), "ln1b": (L, C) if b else None,
        "qkvw": (L, W, C), "qkvb": (L, W) if b else None,
        "attprojw": (L, C, C), "attprojb": (L, C) if b else None,
        "ln2w": (L, C), "ln2b": (L, C) if b else None,
        "fcw": (L, M, C), "fcb": (L, M) if b else None,
        "fcprojw": (L, C, M), "fcprojb": (L, C) if b else None,
        "lnfw": (C,), "lnfb": (C,) if b else None,
        "lm_head": (Vp, C) if not c.tied_head else None,
        "qres_rmsw": (L, C) if qres else None,
        "qres_w1": (L, C // 2, C) if qres else None,
        "qres_w2": (L, C, C // 2) if qres else None,
        "qres_lnw": (L, C) if qres else None,
    }
    return [(name, shapes[name]) for name in PARAM_NAMES]


def kv_cache_bytes_per_token(c):
    _, _, k, v = qkv_layout(c)
    channels = k[2] if (k[0] == SRC_PROJECTION and k == v) else k[2] + v[2]
    return 2 * c.num_layers * channels


# ----------------------------------------------------------------------------
# The model. Parameters are held exactly as the checkpoint stores them (all layers stacked in one
# tensor per name), so that grad.<name> of the debug state is the gradient of that tensor.

def layernorm(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased variance, like GPT-2
    out = (x - mean) / torch.sqrt(var + eps) * w
    return out + b if b is not None else out


def rmsnorm(x, w, eps=1e-5):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu(x):
    # the tanh approximation GPT-2 uses
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def matmul(a, b):
    """a @ b. In bfloat16 it accumulates in float32 and rounds the result to bfloat16, as the CUDA BF16
    build's cuBLASLt GEMMs do, on any host: torch's own CPU bf16 matmul accumulates in bf16 where the
    CPU lacks AVX512-BF16 (7% error at K = 4096), which made the bf16floor check depend on the machine.
    Autograd's backward goes through the same float32 products, its gradients rounded to bfloat16."""
    if a.dtype != torch.bfloat16:
        return a @ b
    return (a.float() @ b.float()).bfloat16()


def linear(x, w, b):
    out = matmul(x, w.t())
    return out + b if b is not None else out


class GPT2(nn.Module):

    def __init__(self, config, device="cpu", dtype=torch.float64):
        super().__init__()
        self.config = config
        self.shapes = param_shapes(config)
        for name, shape in self.shapes:
            if shape is not None:
                self.register_parameter(name, nn.Parameter(torch.zeros(shape, dtype=dtype, device=device)))

    def present(self):
        """(name, parameter) for each tensor this config has, in file order."""
        return [(name, getattr(self, name)) for name, shape in self.shapes if shape is not None]

    def p(self, name, layer=None):
        """A parameter (a layer's slice of it), or None if the config does not have it."""
        t = getattr(self, name, None)
        if t is None or layer is None:
            return t
        return t[layer]

    def attention(self, l, x, rec):
        """One attention block on x = LN1(h), (B, T, C). Returns the output before the projection."""
        c = self.config
        B, T, C = x.shape
        H, Hkv, hd = c.num_heads, c.num_kv_heads, c.head_dim
        _, q_role, k_role, v_role = qkv_layout(c)
        y = linear(x, self.p("qkvw", l), self.p("qkvb", l))  # (B, T, width)

        # a projection role is a column range of y; two roles with the same offset get the very
        # same tensor, so autograd sums their gradients into it (k = v, q = k, q = k = v)
        columns = {}

        def role_tensor(role):
            source, offset, channels = role
            if source == SRC_INPUT:
                return x  # identity role: x itself, its gradient flows into dx
            if source == SRC_RESIDUAL_QUERY:
                r = rmsnorm(x, self.p("qres_rmsw", l))
                f = layernorm(linear(gelu(linear(r, self.p("qres_w1", l), None)), self.p("qres_w2", l), None),
                              self.p("qres_lnw", l), None)
                rec["L%d.qres_f" % l] = f
                return x + f
            if offset not in columns:
                columns[offset] = y[:, :, offset:offset + channels]
            return columns[offset]

        q, k, v = role_tensor(q_role), role_tensor(k_role), role_tensor(v_role)  # (B,T,C), (B,T,KV) x2
        rec["L%d.q" % l], rec["L%d.k" % l], rec["L%d.v" % l] = q, k, v

        qh = q.reshape(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
        kh = k.reshape(B, T, Hkv, hd).transpose(1, 2)  # (B, Hkv, T, hd)
        vh = v.reshape(B, T, Hkv, hd).transpose(1, 2)
        # GQA: query head h reads kv head h // (H // Hkv)
        kh = kh.repeat_interleave(H // Hkv, dim=1)  # (B, H, T, hd)
        vh = vh.repeat_interleave(H // Hkv, dim=1)
        scores = matmul(qh, kh.transpose(-2, -1)) * attn_scale(c)  # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        att = torch.softmax(scores, dim=-1)  # exactly 0 above the diagonal
        rec["L%d.att" % l] = att
        # what a flash-attention forward keeps of att for its backward: att = exp(scores - lse)
        rec["L%d.att_lse" % l] = torch.logsumexp(scores, dim=-1)  # (B, H, T), natural log, masked keys add 0
        atty = matmul(att, vh).transpose(1, 2).reshape(B, T, C)  # (B, T, C), heads side by side again
        rec["L%d.atty" % l] = atty
        return atty

    def forward(self, idx, targets=None, rec=None):
        """idx, targets: (B, T) int64. Returns (logits over the real vocab (B, T, V), loss or None).
        rec: a dict that receives every activation of the debug-state file, by record name."""
        c = self.config
        rec = {} if rec is None else rec
        B, T = idx.shape
        h = self.wte[idx] + self.wpe[:T]  # (B, T, C)
        rec["encoded"] = h
        for l in range(c.num_layers):
            x = layernorm(h, self.p("ln1w", l), self.p("ln1b", l))
            rec["L%d.ln1" % l] = x
            atty = self.attention(l, x, rec)
            h = h + linear(atty, self.p("attprojw", l), self.p("attprojb", l))
            rec["L%d.residual2" % l] = h
            x2 = layernorm(h, self.p("ln2w", l), self.p("ln2b", l))
            rec["L%d.ln2" % l] = x2
            fch = linear(x2, self.p("fcw", l), self.p("fcb", l))  # (B, T, M)
            rec["L%d.fch" % l] = fch
            fch_gelu = gelu(fch)
            rec["L%d.fch_gelu" % l] = fch_gelu
            h = h + linear(fch_gelu, self.p("fcprojw", l), self.p("fcprojb", l))
            rec["L%d.residual3" % l] = h
        lnf = layernorm(h, self.lnfw, self.p("lnfb"))
        rec["lnf"] = lnf
        head = self.wte if c.tied_head else self.lm_head
        logits = matmul(lnf, head[:c.vocab_size].t())  # (B, T, V): the padded rows are never used
        rec["logits"] = logits
        loss = None
        if targets is not None:
            logp = torch.log_softmax(logits, dim=-1)
            loss = -logp.gather(-1, targets.unsqueeze(-1)).mean()
            rec["loss"] = loss.reshape(1)
        return logits, loss


def init_weights(model, seed, test_init=False):
    """GPT-2 init, drawn in float32 on the CPU from `seed` (so every device gets the same weights),
    then cast exactly into the model's dtype. test_init: biases N(0, 0.02) and gains 1 + N(0, 0.1)
    instead of 0 and 1, so that tests exercise every bias and gain path."""
    c = model.config
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.present():
            w = torch.empty(param.shape, dtype=torch.float32)
            if name in PARAM_BIASES and test_init:
                w.normal_(0.0, 0.02, generator=gen)
            elif name in PARAM_BIASES:
                w.zero_()
            elif name in PARAM_GAINS and test_init:
                w.normal_(0.0, 0.1, generator=gen).add_(1.0)
            elif name in PARAM_GAINS:
                w.fill_(1.0)
            else:
                std = 0.02 / math.sqrt(2 * c.num_layers) if name in PARAM_RESIDUAL_SCALED else 0.02
                w.normal_(0.0, std, generator=gen)
            if name in ("wte", "lm_head"):
                w[c.vocab_size:] = 0.0  # padded vocab rows stay zero
            param.copy_(w)


# ----------------------------------------------------------------------------
# Checkpoints (FORMATS.md): 256 int32 header, then the present tensors in file order.

MODEL_MAGIC, DEBUG_MAGIC, DEBUG_VERSION = 20240326, 20240327, 3


def config_to_header(c, version):
    header = np.zeros(256, dtype=np.int32)
    header[0:8] = [MODEL_MAGIC, version, c.max_seq_len, c.vocab_size, c.num_layers, c.num_heads,
                   c.channels, c.padded_vocab_size]
    if version in (6, 7):
        header[8:13] = [c.scheme, c.num_kv_heads, c.mlp_hidden, c.use_bias, c.tied_head]
        header[13] = np.array([c.attn_scale], dtype=np.float32).view(np.int32)[0]
    return header


def llmc_v3_problem(c):
    """Why llm.c's version 3 header cannot describe c, or None when it can."""
    wants = [("scheme", scheme_name(c.scheme), "standard"), ("bias", c.use_bias, 1), ("tied", c.tied_head, 1),
             ("mlp", c.mlp_hidden, 4 * c.channels), ("n_kv_head", c.num_kv_heads, c.num_heads),
             ("attn_scale", c.attn_scale, 0.0)]
    bad = ["%s=%s (needs %s)" % (k, got, want) for k, got, want in wants if got != want]
    return None if not bad else "llm.c's version 3 header cannot store " + ", ".join(bad)


def to_bf16_bits(a):
    """float32 array -> uint16 bfloat16 bits, rounded to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def from_bf16_bits(u):
    """uint16 bfloat16 bits -> float32 (the upper 16 bits of the float32)."""
    return (u.astype(np.uint32) << 16).view(np.float32)


def save_checkpoint(model, path, version=6):
    """Writes the model (its values rounded to float32, or bfloat16 for version 7) via a temp name."""
    c = model.config
    if version == 3:
        problem = llmc_v3_problem(c)
        if problem:
            raise ConfigError("%s: %s (HINT: write version 6 instead)" % (path, problem))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(config_to_header(c, version).tobytes())
        for name, param in model.present():
            a = param.detach().to("cpu", torch.float32).numpy()
            f.write(to_bf16_bits(a).tobytes() if version == 7 else a.tobytes())
    os.replace(tmp, path)


def load_checkpoint(path, device="cpu", dtype=torch.float64, attn_scale_override=None):
    """Reads versions 3, 5 (llm.c) and 6, 7 (ours). Returns the model; ConfigError names the file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError("%s: cannot open model file (%s)" % (path, e.strerror))
    if len(data) < 1024:
        raise ConfigError("%s: truncated model file: %d bytes, shorter than its 1024-byte header" % (path, len(data)))
    header = np.frombuffer(data[:1024], dtype=np.int32)
    if header[0] != MODEL_MAGIC:
        raise ConfigError("%s: bad magic %d in model file, expected %d (HINT: is this a GPT-2 checkpoint? "
                          "see dev/FORMATS.md)" % (path, header[0], MODEL_MAGIC))
    version = int(header[1])
    if version not in (3, 5, 6, 7):
        raise ConfigError("%s: unsupported model file version %d, expected 3 or 5 (llm.c) or 6 or 7 "
                          "(see dev/FORMATS.md)" % (path, version))
    h = [int(x) for x in header]
    c = Config(max_seq_len=h[2], vocab_size=h[3], num_layers=h[4], num_heads=h[5], channels=h[6],
               padded_vocab_size=h[7])
    if version in (6, 7):
        c.scheme, c.num_kv_heads, c.mlp_hidden, c.use_bias, c.tied_head = h[8:13]
        c.attn_scale = float(header[13:14].view(np.float32)[0])
    if attn_scale_override is not None:
        c.attn_scale = f32(attn_scale_override)
    try:
        config_check(c)
    except ConfigError as e:
        raise ConfigError("%s: %s" % (path, e))
    shapes = param_shapes(c)
    numel = sum(int(np.prod(s)) for _, s in shapes if s is not None)
    width = 2 if version in (5, 7) else 4
    expected = 1024 + numel * width
    if len(data) != expected:
        raise ConfigError("%s: %s model file: %d bytes, but its header (%s, scheme %s) needs %d bytes"
                          % (path, "truncated" if len(data) < expected else "oversized", len(data),
                             c.describe(), scheme_name(c.scheme), expected))
    if version in (5, 7):
        values = from_bf16_bits(np.frombuffer(data, dtype=np.uint16, offset=1024))
    else:
        values = np.frombuffer(data, dtype=np.float32, offset=1024)
    model = GPT2(c, device=device, dtype=dtype)
    offset = 0
    with torch.no_grad():
        for name, param in model.present():
            n = param.numel()
            param.copy_(torch.from_numpy(values[offset:offset + n].copy()).view(param.shape))
            offset += n
    return model


# ----------------------------------------------------------------------------
# AdamW, written out as FORMATS.md defines the recorded step

class AdamW:
    def __init__(self, model, lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=1.0):
        self.params = model.present()
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.weight_decay, self.grad_clip = weight_decay, grad_clip
        self.m = {name: torch.zeros_like(p) for name, p in self.params}
        self.v = {name: torch.zeros_like(p) for name, p in self.params}
        self.t = 0

    def hyperparameters(self):
        return [self.lr, self.beta1, self.beta2, self.eps, self.weight_decay, self.grad_clip]

    def step(self):
        """One update from the .grad of every parameter; returns the gradient norm before clipping."""
        self.t += 1
        norm = math.sqrt(sum(float((p.grad * p.grad).sum()) for _, p in self.params))
        scale = self.grad_clip / norm if 0.0 < self.grad_clip < norm else 1.0  # grad_clip 0: no clipping
        with torch.no_grad():
            for name, p in self.params:
                g = scale * p.grad
                m, v = self.m[name], self.v[name]
                m.mul_(self.beta1).add_((1.0 - self.beta1) * g)
                v.mul_(self.beta2).add_((1.0 - self.beta2) * g * g)
                m_hat = m / (1.0 - self.beta1 ** self.t)
                v_hat = v / (1.0 - self.beta2 ** self.t)
                wd = self.weight_decay if PARAM_DECAYED[name] else 0.0
                p.sub_(self.lr * (m_hat / (torch.sqrt(v_hat) + self.eps) + wd * p))
        return norm


# ----------------------------------------------------------------------------
# Debug state (FORMATS.md): named tensor records

def random_batch(config, B, T, seed):
    """B rows of T+1 random tokens in [0, V): inputs are the first T, targets the next tokens."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, config.vocab_size, (B, T + 1), generator=gen)
    return tokens[:, :T].contiguous(), tokens[:, 1:].contiguous()


def compute_debug_state(model, inputs, targets, num_steps=10, **adamw_args):
    """Every record of the debug-state file, in order, as (name, tensor) on the CPU.
    Runs the forward/backward at the model's current weights, then num_steps AdamW steps
    (forward, backward, step) on the same batch. Modifies the model's weights."""
    device = model.wte.device
    x, y = inputs.to(device), targets.to(device)
    opt = AdamW(model, **adamw_args)
    records = [("inputs", inputs.to(torch.int32)), ("targets", targets.to(torch.int32)),
               ("adamw", torch.tensor(opt.hyperparameters(), dtype=torch.float64))]
    step_losses, step_norms = [], []
    for step in range(max(num_steps, 1)):  # with 0 steps: the records alone
        rec = {}
        model.zero_grad(set_to_none=True)
        _, loss = model(x, y, rec)
        loss.backward()
        if step == 0:  # the records are of the initial weights, before any update
            records += [(name, t.detach()) for name, t in rec.items()]
            records += [("grad." + name, p.grad.detach().clone()) for name, p in model.present()]
        if num_steps > 0:
            step_losses.append(float(loss))
            step_norms.append(opt.step())
    if num_steps > 0:
        records += [("step_losses", torch.tensor(step_losses, dtype=torch.float64)),
                    ("step_grad_norms", torch.tensor(step_norms, dtype=torch.float64))]
    return [(name, t.to("cpu")) for name, t in records]


def write_debug_state(path, records, B, T, num_steps):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        header = np.zeros(256, dtype=np.int32)
        header[0:6] = [DEBUG_MAGIC, DEBUG_VERSION, B, T, len(records), num_steps]
        f.write(header.tobytes())
        for name, t in records:
            assert len(name) <= 63 and 1 <= t.dim() <= 4, name
            if t.dtype in (torch.int32, torch.int64):
                dtype_id, a = 1, t.numpy().astype(np.int32)
            else:
                dtype_id, a = 2, t.to(torch.float64).numpy()
            dims = list(a.shape) + [1] * (4 - a.ndim)
            f.write(name.encode("ascii").ljust(64, b"\0"))
            f.write(np.array([dtype_id, a.ndim] + dims + [0, 0], dtype=np.int32).tobytes())
            f.write(np.ascontiguousarray(a).tobytes())
    os.replace(tmp, path)


# ----------------------------------------------------------------------------
# A small training loop on llm.c token shards (header 256 int32: magic 20240520, version 1,
# number of tokens; then the tokens as uint16), for comparing loss curves with the trainers

SHARD_MAGIC = 20240520


def read_shard(path, vocab_size):
    data = open(path, "rb").read()
    header = np.frombuffer(data[:1024], dtype=np.int32) if len(data) >= 1024 else None
    if header is None or header[0] != SHARD_MAGIC or header[1] != 1:
        raise ConfigError("%s: not an llm.c token shard (expected a 1024-byte header with magic %d version 1)"
                          % (path, SHARD_MAGIC))
    if len(data) != 1024 + 2 * int(header[2]):
        raise ConfigError("%s: %d bytes, but its header says %d tokens (%d bytes)"
                          % (path, len(data), header[2], 1024 + 2 * int(header[2])))
    tokens = np.frombuffer(data, dtype=np.uint16, offset=1024).astype(np.int64)
    if len(tokens) and tokens.max() >= vocab_size:
        raise ConfigError("%s: token %d is outside the model's vocab of %d" % (path, tokens.max(), vocab_size))
    return tokens


def read_tokens(pattern, vocab_size):
    files = sorted(glob.glob(pattern))
    if not files:
        raise ConfigError("%s: no file matches this pattern (HINT: prepare data with dev/data/)" % pattern)
    return np.concatenate([read_shard(f, vocab_size) for f in files])


def batches(tokens, B, T):
    """Consecutive (B, T) windows with their next tokens, wrapping around at the end."""
    if len(tokens) < B * T + 1:
        raise ConfigError("%d tokens are too few for one batch of B=%d T=%d" % (len(tokens), B, T))
    pos = 0
    while True:
        if pos + B * T + 1 > len(tokens):
            pos = 0
        buf = torch.from_numpy(tokens[pos:pos + B * T + 1])
        yield buf[:-1].view(B, T), buf[1:].view(B, T)
        pos += B * T


def check_run(c, B, T, steps, steps_flag):
    """The batch and step count of a run, checked before anything is written: one line naming the flag."""
    if B < 1:
        raise ConfigError("--B %d: expected B >= 1" % B)
    if not 1 <= T <= c.max_seq_len:
        raise ConfigError("--T %d: expected 1 <= T <= max_seq_len %d" % (T, c.max_seq_len))
    if steps < 0:
        raise ConfigError("%s %d: expected >= 0" % (steps_flag, steps))


def train(model, train_pattern, val_pattern, steps, B, T, val_batches=4, **adamw_args):
    c = model.config
    check_run(c, B, T, steps, "--train_steps")
    device = model.wte.device
    train_iter = batches(read_tokens(train_pattern, c.vocab_size), B, T)
    val_tokens = read_tokens(val_pattern, c.vocab_size) if val_pattern else None

    def val_loss():
        it = batches(val_tokens, B, T)
        with torch.no_grad():
            return sum(float(model(x.to(device), y.to(device))[1]) for x, y in
                       (next(it) for _ in range(val_batches))) / val_batches
    opt = AdamW(model, **adamw_args)
    for step in range(1, steps + 1):
        t0 = time.time()
        x, y = next(train_iter)
        model.zero_grad(set_to_none=True)
        _, loss = model(x.to(device), y.to(device))
        loss.backward()
        norm = opt.step()
        print("step %d/%d: train loss %.6f norm %.4f (%.1f ms)" % (step, steps, float(loss), norm,
                                                                   1000 * (time.time() - t0)))
    if val_tokens is not None:
        print("val loss %.6f (%d batches)" % (val_loss(), val_batches))


# ----------------------------------------------------------------------------
# Building a model from flags (also used by make_fixtures.py and the tests)

def round_up(n, multiple):
    return (n + multiple - 1) // multiple * multiple


def build_model(config, seed, test_init=False, device="cpu", dtype=torch.float64, bf16=False):
    """A freshly initialized, checked model. Its weights are exactly float32 values (bfloat16 values
    when bf16), so that they equal what its checkpoint stores."""
    config_check(config)
    model = GPT2(config, device=device, dtype=dtype)
    init_weights(model, seed, test_init)
    if bf16:
        with torch.no_grad():
            for _, p in model.present():
                p.copy_(torch.from_numpy(from_bf16_bits(to_bf16_bits(p.cpu().float().numpy()))))
    return model


def generate(model, out_model=None, out_debug=None, B=4, T=None, seed=0, steps=10, version=6, **adamw_args):
    """Writes the checkpoint (before any step) and the debug state of a random batch + `steps` steps."""
    c = model.config
    T = c.max_seq_len if T is None else T
    if out_debug:
        check_run(c, B, T, steps, "--steps")
    if out_model:
        save_checkpoint(model, out_model, version)
    if out_debug:
        inputs, targets = random_batch(c, B, T, seed + 1)
        records = compute_debug_state(model, inputs, targets, steps, **adamw_args)
        write_debug_state(out_debug, records, B, T, steps)
        return records
    return None


SHAPE_FLAGS = ["scheme", "n_layer", "n_embd", "n_head", "n_kv_head", "mlp", "bias", "tied", "max_seq_len",
               "vocab", "padded_vocab"]


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Reference GPT-2 with a Q/K/V scheme: checkpoints and debug states.")
    g = ap.add_argument_group("model shape (when not --load)")
    g.add_argument("--scheme", choices=SCHEMES, default=None, help="Q/K/V scheme (default standard)")
    g.add_argument("--n_layer", type=int, default=None, help="layers (default 12)")
    g.add_argument("--n_embd", type=int, default=None, help="channels C (default 768)")
    g.add_argument("--n_head", type=int, default=None, help="query heads H (default 12)")
    g.add_argument("--n_kv_head", type=int, default=None, help="key/value heads (default n_head; 1 = MQA)")
    g.add_argument("--mlp", type=int, default=None, help="MLP hidden size (default 4 * n_embd)")
    g.add_argument("--bias", type=int, default=None, help="1: GPT-2 biases, 0: none anywhere (default 1)")
    g.add_argument("--tied", type=int, default=None, help="1: LM head is wte, 0: separate lm_head (default 1)")
    g.add_argument("--max_seq_len", type=int, default=None, help="max sequence length (default 1024)")
    g.add_argument("--vocab", type=int, default=None, help="vocab size (default 50257)")
    g.add_argument("--padded_vocab", type=int, default=None, help="padded vocab (default vocab rounded up to 128)")
    ap.add_argument("--attn_scale", type=float, default=None, help="attention scale override (0 = scheme default)")
    ap.add_argument("--seed", type=int, default=0, help="init seed; the batch uses seed + 1")
    ap.add_argument("--test_init", action="store_true", help="random biases and gains (for fixtures)")
    ap.add_argument("--load", default=None, help="read this checkpoint (versions 3, 5, 6, 7) instead of building")
    ap.add_argument("--out_model", default=None, help="write the checkpoint here (version 6 fp32)")
    ap.add_argument("--bf16", action="store_true", help="write version 7 (bf16); the model is rounded to bf16 first")
    ap.add_argument("--llmc_v3", action="store_true", help="write llm.c's version 3 header (standard llm.c shape only)")
    ap.add_argument("--out_debug", default=None, help="write the debug state of a random batch here")
    ap.add_argument("--B", type=int, default=4, help="debug batch size")
    ap.add_argument("--T", type=int, default=None, help="debug sequence length (default max_seq_len)")
    ap.add_argument("--steps", type=int, default=10, help="AdamW steps recorded in the debug state")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight_decay", type=float, default=0.1)
    ap.add_argument("--grad_clip", type=float, default=1.0, help="clip the global gradient norm to this, 0 = off")
    ap.add_argument("--train_data", default=None, help="train on these llm.c shards (glob) for --train_steps")
    ap.add_argument("--val_data", default=None, help="llm.c shards (glob) for a validation loss after training")
    ap.add_argument("--train_steps", type=int, default=20)
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64", help="compute dtype")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    return ap.parse_args(argv)


def config_from_args(args):
    def get(name, default):
        v = getattr(args, name)
        return default if v is None else v
    n_embd, n_head, vocab = get("n_embd", 768), get("n_head", 12), get("vocab", 50257)
    return Config(scheme=SCHEMES.index(get("scheme", "standard")), max_seq_len=get("max_seq_len", 1024),
                  vocab_size=vocab, padded_vocab_size=get("padded_vocab", round_up(vocab, 128)),
                  num_layers=get("n_layer", 12), num_heads=n_head, num_kv_heads=args.n_kv_head,
                  channels=n_embd, mlp_hidden=args.mlp, use_bias=get("bias", 1), tied_head=get("tied", 1),
                  attn_scale=get("attn_scale", 0.0))


def main(argv=None):
    args = parse_args(argv)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    if args.bf16 and args.llmc_v3:
        raise ConfigError("--bf16 and --llmc_v3: choose one checkpoint version")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("--device %s: this torch has no CUDA device (HINT: --device cpu)" % args.device)
    if args.train_data and args.out_debug:
        raise ConfigError("--train_data and --out_debug: the debug state is of the initial weights; run them apart")
    if args.load:
        given = [f for f in SHAPE_FLAGS if getattr(args, f) is not None]
        if given:
            raise ConfigError("--%s cannot be combined with --load (the shape comes from the checkpoint; "
                              "only --attn_scale overrides it)" % given[0])
        model = load_checkpoint(args.load, args.device, dtype, args.attn_scale)
    else:
        model = build_model(config_from_args(args), args.seed, args.test_init, args.device, dtype, args.bf16)
    c = model.config
    print("scheme=%s %s attn_scale=%.9g params=%d" % (scheme_name(c.scheme), c.describe(), attn_scale(c),
                                                     sum(p.numel() for _, p in model.present())))
    version = 7 if args.bf16 else 3 if args.llmc_v3 else 6
    if args.train_data:
        train(model, args.train_data, args.val_data, args.train_steps, args.B,
              c.max_seq_len if args.T is None else args.T,
              lr=args.lr, beta1=args.beta1, beta2=args.beta2, eps=args.eps, weight_decay=args.weight_decay,
              grad_clip=args.grad_clip)
    records = generate(model, args.out_model, args.out_debug, args.B, args.T, args.seed, args.steps, version,
                       lr=args.lr, beta1=args.beta1, beta2=args.beta2, eps=args.eps,
                       weight_decay=args.weight_decay, grad_clip=args.grad_clip)
    if args.out_model:
        print("wrote %s (version %d)" % (args.out_model, version))
    if records is not None:
        rec = dict(records)
        print("wrote %s: loss %.6f, after %d steps %.6f" % (args.out_debug, float(rec["loss"][0]), args.steps,
              float(rec["step_losses"][-1]) if args.steps > 0 else float(rec["loss"][0])))


if __name__ == "__main__":
    try:
        main()
    except ConfigError as e:
        print("train_gpt2.py: %s" % e, file=sys.stderr)
        sys.exit(1)
