# Emulates train_gpt2.cu's cuBLASLt wrapper matmul_lt (column-major semantics, the bias / GELU_AUX /
# DGELU epilogues) and the glue around it with the EXACT argument lists of the C code, and checks the
# wiring against torch autograd in float64:
#   attention_forward / attention_backward (unfused path), every QKV scheme and Hkv;
#   matmul_forward, matmul_backward, matmul_backward_params, bias_backward (a linear layer);
#   the MLP block: matmul_forward_gelu + matmul_forward, then matmul_backward_gelu + matmul_backward
#     (gpt2_forward_staged / gpt2_backward), and q_residual's W1/W2 pair, on every path the launchers
#     can take (GELU in the epilogue; --gelu_fusion 0; no cuBLASLt algorithm for an epilogue; an
#     unaligned bias; -r 1's recomputed GELU);
#   the chunked classifier of gpt2_forward_staged (logits, fused_classifier_kernel, dlnf, dhead
#     accumulated over chunks), tied and untied head, with the encoder's wte/wpe gradient
#     (encoder_buckets_build and the encoder backward kernels) for the tied one.
# Run: /usr/bin/python3 dev/cuda/emulate_matmuls.py  (one PASS/FAIL line per check, exit 1 on a FAIL).
# Every call below is transcribed by hand from train_gpt2.cu, argument for argument, with the C
# function named in a comment: keep them in step with it. A pointer plus an offset is a numpy view
# (buf[off:]); buffers the C code writes before reading start as NaN, so a read of something not
# written (or a beta = 1 where 0 was meant) shows as a NaN. It checks that the GPU code is wired
# right without a GPU; it proves nothing about the kernels' arithmetic (see emulate_rows.py and
# kernel_emulator.sh for those). Preconditions of the CUDA kernels (sizes multiples of 8) are not
# imposed here: the shapes are small and odd on purpose.
import math, os, sys
import numpy as np, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emulate_rows import fused_classifier_kernel, gelu_tanh, gelu_tanh_grad  # noqa: E402
torch.set_default_dtype(torch.float64)
F = torch.nn.functional
rng = np.random.default_rng(0)
RESULTS = []

X, F32 = 'floatX', 'fp32'  # d_type: CUBLAS_X_TYPE, CUDA_R_32F
LT_PLAIN, LT_GELU, LT_DGELU = 0, 1, 2


class Emu:
    # the run-time facts the launchers branch on
    gelu_fusion = 1          # g_gelu_fusion (--gelu_fusion)
    bias_aligned = True      # ((uintptr_t)bias % 16) == 0 for every bias
    no_algo = set()          # epilogues for which cuBLASLt returns no algorithm ('BIAS', 'GELU_AUX_BIAS', ...)
    trace = []               # what ran: 'lt:<epilogue>', 'lt:<epilogue>(none)', kernel names


def nan(n): return np.full(n, np.nan)


def report(name, err, tol):
    ok = bool(np.isfinite(err)) and err <= tol
    print("%s %s max abs err %.2e" % ("PASS" if ok else "FAIL", name, err))
    RESULTS.append(ok)
    return ok


def maxerr(a, b):
    a = np.asarray(a, dtype=np.float64).ravel(); b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape: return math.inf
    d = np.abs(a - b)
    return math.inf if np.isnan(d).any() else (float(d.max()) if d.size else 0.0)


# ---------------------------------------------------------------------------------------------
# matmul_lt: D (m x n, ldd) = alpha * op(A) op(B) + beta * D [+ bias (m)], column-major;
# LT_GELU: aux (like D, ld ldd) = that result, D = gelu(result); LT_DGELU: D = result * gelu'(aux).
# Returns 0 having done nothing when cuBLASLt has no algorithm and there is a bias or an activation;
# without either the C code stops (here: an exception).
def matmul_lt(D, d_type, A, Bm, bias, act, aux, m, n, k, transA, transB, lda, ldb, ldd, alpha, beta, batch, sA, sB, sD):
    epi = 'BIAS' if bias is not None else 'DEFAULT'
    if act == LT_GELU: epi = 'GELU_AUX_BIAS' if bias is not None else 'GELU_AUX'
    if act == LT_DGELU: epi = 'DGELU'
    found = epi not in Emu.no_algo
    Emu.trace.append('lt:' + epi + ('' if found else '(none)'))
    if not found:
        if bias is None and act == LT_PLAIN: raise RuntimeError("matmul_lt: no algorithm for a plain matmul (the C code exits)")
        return 0
    # cuBLAS's own preconditions, and the ones of this wrapper
    assert lda >= (k if transA else m) and ldb >= (n if transB else k) and ldd >= m, "leading dimension too small"
    assert act == LT_PLAIN or (aux is not None and batch == 1), "an epilogue with aux: one batch, aux given"
    assert not (act == LT_DGELU and bias is not None), "DGELU with a bias"
    p = np.arange(m)[:, None]; q = np.arange(k); j = np.arange(n)[None, :]
    for i in range(batch):
        oa, ob, od = i * sA, i * sB, i * sD
        opA = A[oa + q[None, :] + p * lda] if transA else A[oa + p + q[None, :] * lda]      # m x k
        opB = Bm[ob + j + q[:, None] * ldb] if transB else Bm[ob + q[:, None] + j * ldb]  # k x n
        idx = od + p + j * ldd                                                             # m x n
        R = alpha * (opA @ opB)
        if beta != 0.0: R = R + beta * D[idx]  # beta 0: C is not read
        if bias is not None: R = R + bias[p]
        if act == LT_GELU:
            aux[idx] = R
            D[idx] = gelu_tanh(R)
        elif act == LT_DGELU:
            D[idx] = R * gelu_tanh_grad(aux[idx])
        else:
            D[idx] = R
    return 1


# ---------------------------------------------------------------------------------------------
# kernels the launchers fall back on (section "kernels: elementwise", "kernels: LayerNorm")
def add_bias_kernel(out, bias, N, OC):
    Emu.trace.append('add_bias')
    i = np.arange(N * OC); out[i] = out[i] + bias[i % OC]


def gelu_forward(out, inp, n):  # gelu_forward_kernel
    Emu.trace.append('gelu_forward')
    out[:n] = gelu_tanh(inp[:n])


def gelu_backward(dinp, inp, dout, n):  # gelu_backward_kernel: dinp may be dout
    Emu.trace.append('gelu_backward')
    dinp[:n] = gelu_tanh_grad(inp[:n]) * dout[:n]


def bias_backward(dbias, dout, N, OC):  # bias_backward_kernel: dbias += column sums (emulate_rows.py checks its partition)
    Emu.trace.append('bias_backward')
    dbias[:OC] += dout[:N * OC].reshape(N, OC).sum(0)


# ---------------------------------------------------------------------------------------------
# the launchers (section "layers: forward and backward launchers"), argument for argument
def matmul_forward(out, inp, weight, bias, N, C, OC):
    fuse = bias is not None and Emu.bias_aligned
    if not matmul_lt(out, X, weight, inp, bias if fuse else None, LT_PLAIN, None, OC, N, C, 1, 0, C, C, OC, 1.0, 0.0, 1, 0, 0, 0):
        fuse = 0
        matmul_lt(out, X, weight, inp, None, LT_PLAIN, None, OC, N, C, 1, 0, C, C, OC, 1.0, 0.0, 1, 0, 0, 0)
    if bias is not None and not fuse:
        add_bias_kernel(out, bias, N, OC)


def matmul_forward_gelu(out, pre, inp, weight, bias, N, C, OC):
    bias_aligned = bias is None or Emu.bias_aligned
    if (Emu.gelu_fusion and bias_aligned and
            matmul_lt(out, X, weight, inp, bias, LT_GELU, pre, OC, N, C, 1, 0, C, C, OC, 1.0, 0.0, 1, 0, 0, 0)):
        return
    matmul_forward(pre, inp, weight, bias, N, C, OC)
    gelu_forward(out, pre, N * OC)


def matmul_backward_params(dweight, dbias, dout, inp, N, C, OC):
    matmul_lt(dweight, F32, inp, dout, None, LT_PLAIN, None, C, OC, N, 0, 1, C, OC, C, 1.0, 1.0, 1, 0, 0, 0)
    if dbias is not None: bias_backward(dbias, dout, N, OC)


def matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, dinp_beta):
    matmul_lt(dinp, X, weight, dout, None, LT_PLAIN, None, C, N, OC, 0, 0, C, OC, C, 1.0, dinp_beta, 1, 0, 0, 0)
    matmul_backward_params(dweight, dbias, dout, inp, N, C, OC)


def matmul_backward_gelu(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC):
    if (not Emu.gelu_fusion or
            not matmul_lt(dpre, X, weight, dout, None, LT_DGELU, pre, C, N, OC, 0, 0, C, OC, C, 1.0, 0.0, 1, 0, 0, 0)):
        matmul_lt(dpre, X, weight, dout, None, LT_PLAIN, None, C, N, OC, 0, 0, C, OC, C, 1.0, 0.0, 1, 0, 0, 0)
        gelu_backward(dpre, pre, dpre, N * C)
    matmul_backward_params(dweight, dbias, dout, inp, N, C, OC)


# ---------------------------------------------------------------------------------------------
# attention (unfused path): permute_heads_kernel, unpermute_heads_kernel, the softmax kernels
def permute(dst, src, B, T, NH, hd, stride, off):
    for i in range(B*NH*T*hd):
        d = i % hd; t = (i//hd) % T; h = (i//(hd*T)) % NH; b = i//(hd*T*NH)
        dst[i] = src[(b*T+t)*stride + off + h*hd + d]


def unpermute(dst, src, B, T, NH, hd, stride, off, acc):
    W = NH*hd
    for i in range(B*T*W):
        c = i % W; bt = i//W; b = bt//T; t = bt % T; h = c//hd; d = c % hd
        v = src[((b*NH+h)*T+t)*hd+d]; o = bt*stride + off + c
        dst[o] = v + (dst[o] if acc else 0.0)


def softmax_fwd(att, rows, T):
    for r in range(rows):
        t = r % T; a = att[r*T:(r+1)*T]
        m = a[:t+1].max(); e = np.exp(a[:t+1]-m); s = e.sum()
        a[:t+1] = e/s; a[t+1:] = 0.0


def softmax_bwd(datt, att, rows, T, scale):
    for r in range(rows):
        t = r % T; d = datt[r*T:(r+1)*T]; p = att[r*T:(r+1)*T]
        dot = (p[:t+1]*d[:t+1]).sum()
        d[:t+1] = scale*p[:t+1]*(d[:t+1]-dot); d[t+1:] = 0.0


PROJ, INP, RESQ = 0, 1, 2


def layout(scheme, C, KV):
    P, X_ = PROJ, INP
    if scheme == 'q_identity': return 2*KV, (X_, 0, C), (P, 0, KV), (P, KV, KV)
    if scheme == 'k_identity': return 2*C, (P, 0, C), (X_, 0, C), (P, C, C)
    if scheme == 'v_identity': return 2*C, (P, 0, C), (P, C, C), (X_, 0, C)
    if scheme == 'kv_shared': return C+KV, (P, 0, C), (P, C, KV), (P, C, KV)
    if scheme == 'qk_shared': return 2*C, (P, 0, C), (P, 0, C), (P, C, C)
    if scheme == 'qkv_shared': return C, (P, 0, C), (P, 0, C), (P, 0, C)
    if scheme == 'q_residual': return 2*KV, (RESQ, 0, C), (P, 0, KV), (P, KV, KV)
    return C+2*KV, (P, 0, C), (P, C, KV), (P, C+KV, KV)


def share(a, b): return a[0] == PROJ and b[0] == PROJ and a[1] == b[1]


def owners(q, k, v):
    return [0, 0 if share(k, q) else 1, 0 if share(v, q) else (1 if share(v, k) else 2)]


def attention_forward(atty, perm, x, qkv, qres, B, T, C, H, Hkv, hd, scale, W, roles, own):
    nh = [H, Hkv, Hkv]; ptr = [None]*3
    for r in range(3):
        if own[r] != r: ptr[r] = perm[own[r]]; continue
        src, off, ch = roles[r]
        s = qkv if src == PROJ else (x if src == INP else qres)
        stride = W if src == PROJ else C
        permute(perm[r], s, B, T, nh[r], hd, stride, off); ptr[r] = perm[r]
    q, k, v = ptr
    g = H//Hkv; gT = g*T; batches = B*Hkv
    s_q, s_kv, s_att = gT*hd, T*hd, gT*T
    att = nan(B*H*T*T)
    # attention_forward: scores, then y
    matmul_lt(att, X, k, q, None, LT_PLAIN, None, T, gT, hd, 1, 0, hd, hd, T, scale, 0.0, batches, s_kv, s_q, s_att)
    softmax_fwd(att, B*H*T, T)
    yperm = nan(B*H*T*hd)
    matmul_lt(yperm, X, v, att, None, LT_PLAIN, None, hd, gT, T, 0, 0, hd, T, hd, 1.0, 0.0, batches, s_kv, s_att, s_q)
    unpermute(atty, yperm, B, T, H, hd, C, 0, 0)
    return att


def attention_backward(dqkv, dx, dqres, dperm, datty, perm, att, B, T, C, H, Hkv, hd, scale, W, roles, own):
    nh = [H, Hkv, Hkv]
    q, k, v = perm[own[0]], perm[own[1]], perm[own[2]]
    dq, dk, dv = dperm[own[0]], dperm[own[1]], dperm[own[2]]
    written = [0, 0, 0]
    g = H//Hkv; gT = g*T; batches = B*Hkv
    s_q, s_kv, s_att = gT*hd, T*hd, gT*T
    dyperm = nan(B*T*C); permute(dyperm, datty, B, T, H, hd, C, 0)
    datt = nan(B*H*T*T)
    # attention_backward: datt, dv, dscores, dq, dk
    matmul_lt(datt, X, v, dyperm, None, LT_PLAIN, None, T, gT, hd, 1, 0, hd, hd, T, 1.0, 0.0, batches, s_kv, s_q, s_att)
    matmul_lt(dv, X, dyperm, att, None, LT_PLAIN, None, hd, T, gT, 0, 1, hd, T, hd, 1.0,
              1.0 if written[own[2]] else 0.0, batches, s_q, s_att, s_kv)
    written[own[2]] = 1
    softmax_bwd(datt, att, B*H*T, T, scale)
    matmul_lt(dq, X, k, datt, None, LT_PLAIN, None, hd, gT, T, 0, 0, hd, T, hd, 1.0,
              1.0 if written[own[0]] else 0.0, batches, s_kv, s_att, s_q)
    written[own[0]] = 1
    matmul_lt(dk, X, q, datt, None, LT_PLAIN, None, hd, T, gT, 0, 1, hd, T, hd, 1.0,
              1.0 if written[own[1]] else 0.0, batches, s_q, s_att, s_kv)
    written[own[1]] = 1
    wrote = 0
    for r in range(3):
        if own[r] != r: continue
        src, off, ch = roles[r]
        if src == PROJ: unpermute(dqkv, dperm[r], B, T, nh[r], hd, W, off, 0)
        elif src == INP: unpermute(dx, dperm[r], B, T, nh[r], hd, C, 0, wrote); wrote = 1
        else: unpermute(dqres, dperm[r], B, T, nh[r], hd, C, 0, 0)
    return wrote


def check_attention(scheme, B, T, C, H, Hkv):
    hd = C//H; KV = Hkv*hd
    W, qr, kr, vr = layout(scheme, C, KV); roles = [qr, kr, vr]; own = owners(qr, kr, vr)
    scale = 0.3
    x = rng.standard_normal((B, T, C)); w = rng.standard_normal((W, C))*0.3; b = rng.standard_normal(W)*0.1
    qres = rng.standard_normal((B, T, C)) if scheme == 'q_residual' else None
    G = rng.standard_normal((B, T, C))
    # torch reference
    xt = torch.tensor(x, requires_grad=True); wt = torch.tensor(w, requires_grad=True); bt = torch.tensor(b, requires_grad=True)
    qrt = torch.tensor(qres, requires_grad=True) if qres is not None else None
    y = xt @ wt.t() + bt

    def role(r):
        if r[0] == INP: return xt
        if r[0] == RESQ: return qrt
        return y[:, :, r[1]:r[1]+r[2]]
    qq, kk, vv = role(qr), role(kr), role(vr)
    qh = qq.reshape(B, T, H, hd).transpose(1, 2)
    kh = kk.reshape(B, T, Hkv, hd).transpose(1, 2).repeat_interleave(H//Hkv, 1)
    vh = vv.reshape(B, T, Hkv, hd).transpose(1, 2).repeat_interleave(H//Hkv, 1)
    sc = (qh @ kh.transpose(-2, -1))*scale
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    att_ref = torch.softmax(sc.masked_fill(~mask, float('-inf')), -1)
    atty_ref = (att_ref @ vh).transpose(1, 2).reshape(B, T, C)
    (atty_ref*torch.tensor(G)).sum().backward()
    # emulation, mirroring gpt2_forward_staged / gpt2_backward
    N = B*T
    qkv = nan(N*W); matmul_forward(qkv, x.ravel(), w.ravel(), b, N, C, W)
    sizes = [N*C, N*KV, N*KV]
    perm = [nan(sizes[r]) if own[r] == r else None for r in range(3)]
    atty = nan(N*C)
    att = attention_forward(atty, perm, x.ravel(), qkv, qres.ravel() if qres is not None else None, B, T, C, H, Hkv, hd, scale, W, roles, own)
    dperm = [nan(sizes[r]) if own[r] == r else None for r in range(3)]
    dqkv = nan(N*W); dx = nan(N*C); dqres = nan(N*C)
    wrote = attention_backward(dqkv, dx, dqres, dperm, G.ravel(), perm, att, B, T, C, H, Hkv, hd, scale, W, roles, own)
    dw = np.zeros(W*C); db = np.zeros(W)
    matmul_backward(dx, dw, db, dqkv, x.ravel(), w.ravel(), N, C, W, 1.0 if wrote else 0.0)
    errs = [maxerr(atty, atty_ref.detach().numpy()), maxerr(att, att_ref.detach().numpy()), maxerr(dx, xt.grad.numpy()),
            maxerr(dw, wt.grad.numpy()), maxerr(db, bt.grad.numpy())]
    if qres is not None: errs.append(maxerr(dqres, qrt.grad.numpy()))
    report("attention %s B=%d T=%d C=%d H=%d Hkv=%d owners=%s (atty, att, dx, dw, db%s)"
           % (scheme, B, T, C, H, Hkv, own, ", dqres" if qres is not None else ""), max(errs), 1e-10)


# ---------------------------------------------------------------------------------------------
def check_linear():
    # a linear layer alone, with bias, non-square: matmul_forward on both bias paths, matmul_backward
    N, C, OC = 7, 5, 3
    x = rng.standard_normal((N, C)); w = rng.standard_normal((OC, C)); b = rng.standard_normal(OC); G = rng.standard_normal((N, OC))
    e = 0.0
    for aligned in (True, False):
        Emu.bias_aligned = aligned
        out = nan(N*OC); matmul_forward(out, x.ravel(), w.ravel(), b, N, C, OC)
        e = max(e, maxerr(out, x @ w.T + b))
    Emu.bias_aligned = True
    Emu.no_algo = {'BIAS'}
    out = nan(N*OC); matmul_forward(out, x.ravel(), w.ravel(), b, N, C, OC)
    e = max(e, maxerr(out, x @ w.T + b))
    Emu.no_algo = set()
    dw0 = rng.standard_normal(OC*C); db0 = rng.standard_normal(OC)
    dinp = nan(N*C); dw = dw0.copy(); db = db0.copy()
    matmul_backward(dinp, dw, db, G.ravel(), x.ravel(), w.ravel(), N, C, OC, 0.0)
    prev = rng.standard_normal(N*C); dinp2 = prev.copy(); dw2 = np.zeros(OC*C)
    matmul_backward(dinp2, dw2, None, G.ravel(), x.ravel(), w.ravel(), N, C, OC, 1.0)
    e = max(e, maxerr(dinp, G @ w), maxerr(dw, dw0 + (G.T @ x).ravel()), maxerr(db, db0 + G.sum(0)),
            maxerr(dinp2, prev + (G @ w).ravel()), maxerr(dw2, G.T @ x))
    report("linear N=%d C=%d OC=%d: matmul_forward (bias epilogue, unaligned bias, no BIAS algorithm), "
           "matmul_backward (dinp_beta 0/1, dweight/dbias +=)" % (N, C, OC), e, 1e-12)


# the paths of the MLP launchers, and what each runs (Emu.trace) for the MLP block's four calls
MLP_CASES = [
    # name, gelu_fusion, bias_aligned, no_algo, recompute
    ("GELU epilogues (gelu_fusion 1)", 1, True, set(), 0),
    ("--gelu_fusion 0", 0, True, set(), 0),
    ("gelu_fusion 1, no cuBLASLt algorithm for GELU_AUX_BIAS / DGELU", 1, True, {'GELU_AUX_BIAS', 'GELU_AUX', 'DGELU'}, 0),
    ("gelu_fusion 1, unaligned biases", 1, False, set(), 0),
    ("gelu_fusion 1, no algorithm for any epilogue (BIAS too)", 1, True, {'BIAS', 'GELU_AUX_BIAS', 'GELU_AUX', 'DGELU'}, 0),
    ("GELU epilogues, -r 1 (gelu recomputed from fch)", 1, True, set(), 1),
    ("--gelu_fusion 0, -r 1", 0, True, set(), 1),
]
MLP_TRACES = {  # forward: fc, fcproj; backward: matmul_backward_gelu, matmul_backward (fc)
    0: ['lt:GELU_AUX_BIAS', 'lt:BIAS', 'lt:DGELU', 'lt:DEFAULT', 'bias_backward', 'lt:DEFAULT', 'lt:DEFAULT', 'bias_backward'],
    1: ['lt:BIAS', 'gelu_forward', 'lt:BIAS', 'lt:DEFAULT', 'gelu_backward', 'lt:DEFAULT', 'bias_backward', 'lt:DEFAULT',
        'lt:DEFAULT', 'bias_backward'],
    2: ['lt:GELU_AUX_BIAS(none)', 'lt:BIAS', 'gelu_forward', 'lt:BIAS', 'lt:DGELU(none)', 'lt:DEFAULT', 'gelu_backward',
        'lt:DEFAULT', 'bias_backward', 'lt:DEFAULT', 'lt:DEFAULT', 'bias_backward'],
    3: ['lt:DEFAULT', 'add_bias', 'gelu_forward', 'lt:DEFAULT', 'add_bias', 'lt:DGELU', 'lt:DEFAULT', 'bias_backward',
        'lt:DEFAULT', 'lt:DEFAULT', 'bias_backward'],
    4: ['lt:GELU_AUX_BIAS(none)', 'lt:BIAS(none)', 'lt:DEFAULT', 'add_bias', 'gelu_forward', 'lt:BIAS(none)', 'lt:DEFAULT',
        'add_bias', 'lt:DGELU(none)', 'lt:DEFAULT', 'gelu_backward', 'lt:DEFAULT', 'bias_backward', 'lt:DEFAULT',
        'lt:DEFAULT', 'bias_backward'],
}
MLP_TRACES[5] = MLP_TRACES[0][:2] + ['gelu_forward'] + MLP_TRACES[0][2:]
MLP_TRACES[6] = MLP_TRACES[1][:3] + ['gelu_forward'] + MLP_TRACES[1][3:]
QRES_TRACES = {  # no biases: W1 (GELU), W2; backward: matmul_backward_gelu (W2), matmul_backward (W1)
    0: ['lt:GELU_AUX', 'lt:DEFAULT', 'lt:DGELU', 'lt:DEFAULT', 'lt:DEFAULT', 'lt:DEFAULT'],
    1: ['lt:DEFAULT', 'gelu_forward', 'lt:DEFAULT', 'lt:DEFAULT', 'gelu_backward', 'lt:DEFAULT', 'lt:DEFAULT', 'lt:DEFAULT'],
    2: ['lt:GELU_AUX(none)', 'lt:DEFAULT', 'gelu_forward', 'lt:DEFAULT', 'lt:DGELU(none)', 'lt:DEFAULT', 'gelu_backward',
        'lt:DEFAULT', 'lt:DEFAULT', 'lt:DEFAULT'],
}
QRES_TRACES[3] = QRES_TRACES[0]  # no bias: alignment plays no part
QRES_TRACES[4] = QRES_TRACES[2]


def set_case(case):
    _, Emu.gelu_fusion, Emu.bias_aligned, Emu.no_algo, recompute = case
    Emu.trace = []
    return recompute


def check_mlp(ci, N, C, M):
    # gpt2_forward_staged: matmul_forward_gelu(fch_gelu, fch, ln2, fcw, fcb, N, C, M);
    #   matmul_forward(proj_out, fch_gelu, fcprojw, fcprojb, N, M, C)
    # gpt2_backward: [-r 1: gelu_forward(fch_gelu, fch, BT * M)]
    #   matmul_backward_gelu(dbuf_m, dfcprojw, dfcprojb, dresidual, fch_gelu, fcprojw, fch, N, M, C)
    #   matmul_backward(dbuf_c, dfcw, dfcb, dbuf_m, ln2, fcw, N, C, M, 0.0f)
    case = MLP_CASES[ci]
    recompute = set_case(case)
    ln2 = rng.standard_normal((N, C)); G = rng.standard_normal((N, C))
    fcw = rng.standard_normal((M, C)) * 0.5; fcb = rng.standard_normal(M) * 0.5
    fcprojw = rng.standard_normal((C, M)) * 0.5; fcprojb = rng.standard_normal(C) * 0.5
    g0 = [rng.standard_normal(s) for s in (M * C, M, C * M, C)]  # earlier micro-batches' gradients
    dfcw, dfcb, dfcprojw, dfcprojb = [g.copy() for g in g0]
    fch, fch_gelu, proj_out = nan(N * M), nan(N * M), nan(N * C)
    matmul_forward_gelu(fch_gelu, fch, ln2.ravel(), fcw.ravel(), fcb, N, C, M)
    matmul_forward(proj_out, fch_gelu, fcprojw.ravel(), fcprojb, N, M, C)
    fwd_fch, fwd_gelu = fch.copy(), fch_gelu.copy()
    if recompute >= 1:
        fch_gelu[:] = np.nan  # the one shared buffer, overwritten by the other layers
        gelu_forward(fch_gelu, fch, N * M)
    dbuf_m, dbuf_c = nan(N * M), nan(N * C)
    matmul_backward_gelu(dbuf_m, dfcprojw, dfcprojb, G.ravel(), fch_gelu, fcprojw.ravel(), fch, N, M, C)
    matmul_backward(dbuf_c, dfcw, dfcb, dbuf_m, ln2.ravel(), fcw.ravel(), N, C, M, 0.0)
    # torch
    t = {k: torch.tensor(v, requires_grad=True) for k, v in
         dict(ln2=ln2, fcw=fcw, fcb=fcb, fcprojw=fcprojw, fcprojb=fcprojb).items()}
    h = t['ln2'] @ t['fcw'].T + t['fcb']; hg = F.gelu(h, approximate='tanh'); out = hg @ t['fcprojw'].T + t['fcprojb']
    h.retain_grad()
    (out * torch.tensor(G)).sum().backward()
    errs = [maxerr(fwd_fch, h.detach().numpy()), maxerr(fwd_gelu, hg.detach().numpy()), maxerr(proj_out, out.detach().numpy()),
            maxerr(dbuf_m, h.grad.numpy()), maxerr(dbuf_c, t['ln2'].grad.numpy()),
            maxerr(dfcw, g0[0] + t['fcw'].grad.numpy().ravel()), maxerr(dfcb, g0[1] + t['fcb'].grad.numpy()),
            maxerr(dfcprojw, g0[2] + t['fcprojw'].grad.numpy().ravel()), maxerr(dfcprojb, g0[3] + t['fcprojb'].grad.numpy())]
    tr_ok = Emu.trace == MLP_TRACES[ci]
    if not tr_ok: print("  trace %s\n  expected %s" % (Emu.trace, MLP_TRACES[ci]))
    report("MLP block N=%d C=%d M=%d, %s: fch, fch_gelu, proj_out, dfch, dln2, dfcw, dfcb, dfcprojw, dfcprojb; path %s"
           % (N, C, M, case[0], "as expected" if tr_ok else "WRONG"), max(errs) if tr_ok else math.inf, 1e-12)


def check_qres_mlp(ci, N, C):
    # q_residual (gpt2_forward_staged): matmul_forward_gelu(hg, h, r, W1, NULL, N, C, C / 2);
    #   matmul_forward(u, hg, W2, NULL, N, C / 2, C)
    # gpt2_backward: matmul_backward_gelu(dhg, dW2, NULL, du, hg, W2, h, N, C / 2, C);
    #   matmul_backward(dr, dW1, NULL, dhg, r, W1, N, C, C / 2, 0.0f)
    case = MLP_CASES[ci]
    set_case(case)
    Ch = C // 2
    r = rng.standard_normal((N, C)); du = rng.standard_normal((N, C))
    W1 = rng.standard_normal((Ch, C)) * 0.5; W2 = rng.standard_normal((C, Ch)) * 0.5
    g0 = [rng.standard_normal(Ch * C), rng.standard_normal(C * Ch)]
    dW1, dW2 = g0[0].copy(), g0[1].copy()
    h, hg, u = nan(N * Ch), nan(N * Ch), nan(N * C)
    matmul_forward_gelu(hg, h, r.ravel(), W1.ravel(), None, N, C, C // 2)
    matmul_forward(u, hg, W2.ravel(), None, N, C // 2, C)
    dhg, dr = nan(N * Ch), nan(N * C)
    matmul_backward_gelu(dhg, dW2, None, du.ravel(), hg, W2.ravel(), h, N, C // 2, C)
    matmul_backward(dr, dW1, None, dhg, r.ravel(), W1.ravel(), N, C, C // 2, 0.0)
    rt = torch.tensor(r, requires_grad=True); W1t = torch.tensor(W1, requires_grad=True); W2t = torch.tensor(W2, requires_grad=True)
    ht = rt @ W1t.T; ht.retain_grad(); hgt = F.gelu(ht, approximate='tanh'); ut = hgt @ W2t.T
    (ut * torch.tensor(du)).sum().backward()
    errs = [maxerr(h, ht.detach().numpy()), maxerr(hg, hgt.detach().numpy()), maxerr(u, ut.detach().numpy()),
            maxerr(dhg, ht.grad.numpy()), maxerr(dr, rt.grad.numpy()),
            maxerr(dW1, g0[0] + W1t.grad.numpy().ravel()), maxerr(dW2, g0[1] + W2t.grad.numpy().ravel())]
    tr_ok = Emu.trace == QRES_TRACES[ci]
    if not tr_ok: print("  trace %s\n  expected %s" % (Emu.trace, QRES_TRACES[ci]))
    report("q_residual W1/W2 N=%d C=%d, %s: h, hg, u, dh, dr, dW1, dW2; path %s"
           % (N, C, case[0], "as expected" if tr_ok else "WRONG"), max(errs) if tr_ok else math.inf, 1e-12)


# ---------------------------------------------------------------------------------------------
# the classifier (gpt2_forward_staged) and, for the tied head, the encoder's share of dwte
# (encoder_buckets_build, encoder_backward_wpe/wte/wte_reduce kernels in gpt2_backward)
def gpt2_logits_rows(B, T, CLASSIFIER_CHUNK_ROWS):  # attention_variants.cuh
    bt = B * T; chunk = T if T > CLASSIFIER_CHUNK_ROWS else CLASSIFIER_CHUNK_ROWS
    return bt if bt < chunk else chunk


def loss_sum_kernel(accum, losses, n): accum[0] += float(np.sum(losses[:n]))


def encoder_bucket_ints(cap): return 6 * cap + 2


def encoder_scratch_rows(cap, ENCODER_CHUNK): return 2 * cap // ENCODER_CHUNK + 1


def encoder_buckets_layout(base, cap):
    o = {}
    o['chunk_tok'] = base
    o['chunk_start'] = o['chunk_tok'] + cap
    o['chunk_slot'] = o['chunk_start'] + cap + 1
    o['reduce_tok'] = o['chunk_slot'] + cap
    o['reduce_start'] = o['reduce_tok'] + cap
    o['pos'] = o['reduce_start'] + cap + 1
    return o


def encoder_buckets_build(buf, o, inputs, n, V, ENCODER_CHUNK):  # returns (num_chunks, num_reduce)
    nxt = [0] * (V + 1)
    for i in range(n): nxt[inputs[i] + 1] += 1
    for v in range(V): nxt[v + 1] += nxt[v]  # next[v]: first index of token v
    pos = o['pos']
    for i in range(n):
        buf[pos + nxt[inputs[i]]] = i; nxt[inputs[i]] += 1  # next[v] ends one past token v's last
    chunks = reduce = slot = 0
    begin = 0
    while begin < n:
        tok = inputs[buf[pos + begin]]
        end = nxt[tok]
        nchunks = (end - begin + ENCODER_CHUNK - 1) // ENCODER_CHUNK
        if nchunks > 1:
            buf[o['reduce_tok'] + reduce] = tok; buf[o['reduce_start'] + reduce] = slot; reduce += 1
        for k in range(nchunks):
            buf[o['chunk_tok'] + chunks] = tok
            buf[o['chunk_start'] + chunks] = begin + k * ENCODER_CHUNK
            if nchunks > 1: buf[o['chunk_slot'] + chunks] = slot; slot += 1
            else: buf[o['chunk_slot'] + chunks] = -1
            chunks += 1
        begin = end
    buf[o['chunk_start'] + chunks] = n
    buf[o['reduce_start'] + reduce] = slot
    return chunks, reduce


def encoder_backward(dwte, dwpe, scratch, dout, h, cap, B, T, C, num_chunks, num_reduce):  # gpt2_backward's tail
    # encoder_backward_wpe_kernel: dwpe[t, c] += sum_b dout[b, t, c]
    for t in range(T):
        acc = np.zeros(C)
        for b in range(B): acc += dout[(b * T + t) * C:(b * T + t + 1) * C]
        dwpe[t * C:(t + 1) * C] += acc
    o = encoder_buckets_layout(2 * cap, cap)
    chunk_tok, chunk_start, chunk_slot = h[o['chunk_tok']:], h[o['chunk_start']:], h[o['chunk_slot']:]
    reduce_tok, reduce_start, pos = h[o['reduce_tok']:], h[o['reduce_start']:], h[o['pos']:]
    for u in range(num_chunks):  # encoder_backward_wte_kernel, block u
        acc = np.zeros(C)
        for p in range(chunk_start[u], chunk_start[u + 1]): acc += dout[pos[p] * C:(pos[p] + 1) * C]
        slot = chunk_slot[u]
        if slot < 0: dwte[chunk_tok[u] * C:(chunk_tok[u] + 1) * C] += acc
        else: scratch[slot * C:(slot + 1) * C] = acc
    for r in range(num_reduce):  # encoder_backward_wte_reduce_kernel, block r
        acc = np.zeros(C)
        for s in range(reduce_start[r], reduce_start[r + 1]): acc += scratch[s * C:(s + 1) * C]
        dwte[reduce_tok[r] * C:(reduce_tok[r] + 1) * C] += acc


def check_classifier(B, T, C, V, Vp, chunk_rows, tied, P=8, cap_extra=0, ENCODER_CHUNK=2):
    set_case(MLP_CASES[0])
    N = B * T
    logits_rows = gpt2_logits_rows(B, T, chunk_rows)
    lnf = rng.standard_normal((N, C))
    head = rng.standard_normal((Vp, C)) * 0.5  # rows V.. are padding: finite values that must not count
    targets = rng.integers(0, V, N); targets[-1] = V - 1
    inputs = rng.integers(0, min(V, 3), N)  # few tokens: several chunks per token with ENCODER_CHUNK 2
    Genc = rng.standard_normal((N, C))      # d encoded, as the layers would leave it in dresidual
    wpe = rng.standard_normal((T, C))
    dhead0 = rng.standard_normal(Vp * C); dwpe0 = rng.standard_normal(T * C)
    dhead = dhead0.copy(); dwpe = dwpe0.copy()
    dloss = 1.0 / N
    output = nan(logits_rows * Vp); losses = nan(N); dbuf_c = nan(N * C); loss_sum = np.zeros(1)
    targets_present = 1
    # gpt2_forward_staged: the classifier, logits_rows rows at a time
    chunks = []
    for r0 in range(0, N, logits_rows):
        rows = N - r0 if N - r0 < logits_rows else logits_rows
        chunks.append(rows)
        lnf_rows = lnf.ravel()[r0 * C:]
        matmul_forward(output, lnf_rows, head.ravel(), None, rows, C, Vp)
        fused_classifier_kernel(output, losses[r0:], targets[r0:], rows, V, Vp, dloss, targets_present, 1024, P)
        if targets_present:
            matmul_backward(dbuf_c[r0 * C:], dhead, None, output, lnf_rows, head.ravel(), rows, C, Vp, 0.0)
    loss_sum_kernel(loss_sum, losses, N)
    mean_loss = loss_sum[0] / N  # gpt2_mean_loss
    # torch: mean cross-entropy over the N rows (dloss = 1 / N), real vocabulary rows of the head
    lnf_t = torch.tensor(lnf, requires_grad=True); head_t = torch.tensor(head[:V], requires_grad=True)
    logits_t = lnf_t @ head_t.T
    loss_t = F.cross_entropy(logits_t, torch.tensor(targets))
    total = loss_t
    if tied:  # head is wte: the encoder adds its share to the same gradient
        wpe_t = torch.tensor(wpe, requires_grad=True)
        enc = head_t[torch.tensor(inputs)] + wpe_t.repeat(B, 1)
        total = total + (enc * torch.tensor(Genc)).sum()
        cap = N + cap_extra
        hbuf = np.full(2 * cap + encoder_bucket_ints(cap), -7, dtype=np.int64)  # batch_ints(cap), poisoned
        hbuf[:N] = inputs; hbuf[cap:cap + N] = targets
        # gpt2_stage_batch
        o = encoder_buckets_layout(2 * cap, cap)
        nch, nred = encoder_buckets_build(hbuf, o, inputs, N, V, ENCODER_CHUNK)
        slots = hbuf[o['reduce_start'] + nred]
        assert slots <= encoder_scratch_rows(cap, ENCODER_CHUNK), "wte scratch rows"
        scratch = nan(encoder_scratch_rows(cap, ENCODER_CHUNK) * C)
        encoder_backward(dhead, dwpe, scratch, Genc.ravel(), hbuf, cap, B, T, C, nch, nred)
    total.backward()
    ref_losses = F.cross_entropy(logits_t.detach(), torch.tensor(targets), reduction='none').numpy()
    errs = [maxerr(losses, ref_losses), abs(mean_loss - loss_t.item()), maxerr(dbuf_c, lnf_t.grad.numpy()),
            maxerr(dhead[:V * C], dhead0[:V * C] + head_t.grad.numpy().ravel()),
            maxerr(dhead[V * C:], dhead0[V * C:])]
    if tied: errs.append(maxerr(dwpe, dwpe0 + wpe_t.grad.numpy().ravel()))
    what = "tied head (dwte += classifier + encoder, %d chunks of %d positions / %d reduced tokens, cap %d)" % (
        nch, ENCODER_CHUNK, nred, cap) if tied else "untied head"
    report("classifier B=%d T=%d C=%d V=%d Vp=%d pack=%d logits_rows=%d chunks %s, %s: losses, mean loss, dlnf, dhead "
           "(padded rows untouched)%s" % (B, T, C, V, Vp, P, logits_rows, chunks, what, ", dwpe" if tied else ""),
           max(errs), 1e-12)
    # without targets (sampling, the test): matmul_forward(output, lnf, head, NULL, N, C, Vp), N <= logits_rows
    if N <= logits_rows:
        out = nan(logits_rows * Vp)
        matmul_forward(out, lnf.ravel(), head.ravel(), None, N, C, Vp)
        report("classifier without targets N=%d Vp=%d: logits (all Vp columns)" % (N, Vp),
               maxerr(out[:N * Vp], lnf @ head.T), 1e-12)


def check_encoder_buckets():
    # encoder_buckets_build's output, fuzzed: chunks partition the positions, each chunk holds at most
    # ENCODER_CHUNK positions of its token in increasing order, a token's chunks are consecutive, the
    # slots of the tokens with several chunks are 0, 1, .. and within encoder_scratch_rows(cap)
    worst = 0.0; cases = 0
    for ENCODER_CHUNK in (1, 2, 3, 64):
        for n in (1, 2, 7, 65, 130, 300):
            for dist in ('one token', 'uniform', 'chunk+1 each', 'skewed'):
                V = 50
                if dist == 'one token': inputs = np.full(n, 7)
                elif dist == 'uniform': inputs = rng.integers(0, V, n)
                elif dist == 'chunk+1 each': inputs = (np.arange(n) // (ENCODER_CHUNK + 1)) % V
                else: inputs = np.minimum(rng.geometric(0.3, n) - 1, V - 1)
                inputs = [int(t) for t in rng.permutation(inputs)]
                cap = n + int(rng.integers(0, 3))
                buf = np.full(2 * cap + encoder_bucket_ints(cap), -7, dtype=np.int64)
                o = encoder_buckets_layout(2 * cap, cap)
                nch, nred = encoder_buckets_build(buf, o, inputs, n, V, ENCODER_CHUNK)
                cs, pos = buf[o['chunk_start']:], buf[o['pos']:]
                seen = np.zeros(n, dtype=int); slots = []
                for u in range(nch):
                    tok = buf[o['chunk_tok'] + u]; ps = [int(pos[p]) for p in range(cs[u], cs[u + 1])]
                    ok = 0 < len(ps) <= ENCODER_CHUNK and all(inputs[q] == tok for q in ps) and ps == sorted(ps)
                    if not ok: worst = math.inf
                    seen[ps] += 1
                    if buf[o['chunk_slot'] + u] >= 0: slots.append(int(buf[o['chunk_slot'] + u]))
                rs = [int(buf[o['reduce_start'] + r]) for r in range(nred + 1)]
                if (seen != 1).any() or slots != list(range(len(slots))) or rs[-1] != len(slots) or rs != sorted(rs):
                    worst = math.inf
                if len(slots) > encoder_scratch_rows(cap, ENCODER_CHUNK): worst = math.inf
                cases += 1
    report("encoder_buckets_build fuzz (%d batches; chunks partition positions, <= ENCODER_CHUNK of one token, "
           "stable order, slots within encoder_scratch_rows)" % cases, worst, 0.0)


def run_check(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001  an assertion or an index out of range: a FAIL line
        print("FAIL %s%s raised %s: %s" % (fn.__name__, args, type(e).__name__, e))
        RESULTS.append(False)


def main():
    for scheme in ['standard', 'q_identity', 'k_identity', 'v_identity', 'kv_shared', 'qk_shared', 'qkv_shared', 'q_residual']:
        hkvs = [4, 2, 1] if scheme in ('standard', 'q_identity', 'kv_shared', 'q_residual') else [4]
        for Hkv in hkvs:
            run_check(check_attention, scheme, 2, 5, 12, 4, Hkv)
    run_check(check_linear)
    for ci in range(len(MLP_CASES)):
        run_check(check_mlp, ci, 7, 5, 11)
    for ci in range(5):
        run_check(check_qres_mlp, ci, 7, 6)
    run_check(check_classifier, 11, 1, 5, 21, 24, 4, True)          # 11 rows in chunks of 4: 4, 4, 3
    run_check(check_classifier, 11, 1, 5, 21, 24, 4, False)
    run_check(check_classifier, 7, 2, 6, 13, 16, 4, True, 4, 5)     # 4, 4, 4, 2; pack 4 (FP32); cap > B * T
    run_check(check_classifier, 2, 5, 3, 30, 32, 4, False)          # T > chunk rows: chunks of T = 5
    run_check(check_classifier, 2, 3, 4, 9, 16, 64, True)           # one chunk: the logits of every row kept
    run_check(check_encoder_buckets)
    print("%d checks, %d FAIL" % (len(RESULTS), RESULTS.count(False)))
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
