# Emulates train_gpt2.cu's matmul_lt (cuBLASLt column-major semantics) and attention/linear glue
# with the exact argument lists of the C code, and checks against torch autograd (float64).
# Run: /usr/bin/python3 dev/cuda/emulate_matmuls.py. The argument lists below are transcribed by hand
# from train_gpt2.cu (matmul_forward/backward, attention_forward/backward): keep them in step with it.
# It checks that the GPU code is wired right without a GPU; it proves nothing about the kernels themselves.
import numpy as np, torch, itertools, sys
torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(0)

def lt(D, A, Bm, bias, m, n, k, transA, transB, lda, ldb, ldd, alpha, beta, batch=1, sA=0, sB=0, sD=0):
    for i in range(batch):
        oa, ob, od = i*sA, i*sB, i*sD
        if transA:  # stored k x m
            Ast = np.array([[A[oa + r + c*lda] for c in range(m)] for r in range(k)]); opA = Ast.T
        else:
            opA = np.array([[A[oa + r + c*lda] for c in range(k)] for r in range(m)])
        if transB:  # stored n x k
            Bst = np.array([[Bm[ob + r + c*ldb] for c in range(k)] for r in range(n)]); opB = Bst.T
        else:
            opB = np.array([[Bm[ob + r + c*ldb] for c in range(n)] for r in range(k)])
        R = alpha * (opA @ opB)
        for r in range(m):
            for c in range(n):
                idx = od + r + c*ldd
                D[idx] = R[r, c] + beta * D[idx] + (bias[r] if bias is not None else 0.0)

def matmul_forward(out, inp, w, b, N, C, OC, fuse=True):
    # fuse=False: the path without the bias epilogue (unaligned bias, or no cuBLASLt algorithm with it):
    # plain matmul, then add_bias_kernel
    lt(out, w, inp, b if fuse else None, OC, N, C, 1, 0, C, C, OC, 1.0, 0.0)
    if b is not None and not fuse:
        for i in range(N*OC): out[i] = out[i] + b[i % OC]

def matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC, dinp_beta):
    lt(dinp, w, dout, None, C, N, OC, 0, 0, C, OC, C, 1.0, dinp_beta)
    lt(dw, inp, dout, None, C, OC, N, 0, 1, C, OC, C, 1.0, 1.0)
    if db is not None:
        db += dout.reshape(N, OC).sum(0)

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
    P, X = PROJ, INP
    if scheme == 'q_identity': return 2*KV, (X,0,C), (P,0,KV), (P,KV,KV)
    if scheme == 'k_identity': return 2*C, (P,0,C), (X,0,C), (P,C,C)
    if scheme == 'v_identity': return 2*C, (P,0,C), (P,C,C), (X,0,C)
    if scheme == 'kv_shared': return C+KV, (P,0,C), (P,C,KV), (P,C,KV)
    if scheme == 'qk_shared': return 2*C, (P,0,C), (P,0,C), (P,C,C)
    if scheme == 'qkv_shared': return C, (P,0,C), (P,0,C), (P,0,C)
    if scheme == 'q_residual': return 2*KV, (RESQ,0,C), (P,0,KV), (P,KV,KV)
    return C+2*KV, (P,0,C), (P,C,KV), (P,C+KV,KV)

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
    g = H//Hkv; gT = g*T; nb = B*Hkv
    sq, skv, satt = gT*hd, T*hd, gT*T
    att = np.zeros(B*H*T*T)
    lt(att, k, q, None, T, gT, hd, 1, 0, hd, hd, T, scale, 0.0, nb, skv, sq, satt)
    softmax_fwd(att, B*H*T, T)
    y = np.zeros(B*H*T*hd)
    lt(y, v, att, None, hd, gT, T, 0, 0, hd, T, hd, 1.0, 0.0, nb, skv, satt, sq)
    unpermute(atty, y, B, T, H, hd, C, 0, 0)
    return att

def attention_backward(dqkv, dx, dqres, dperm, datty, perm, att, B, T, C, H, Hkv, hd, scale, W, roles, own):
    nh = [H, Hkv, Hkv]
    q, k, v = perm[own[0]], perm[own[1]], perm[own[2]]
    dq, dk, dv = dperm[own[0]], dperm[own[1]], dperm[own[2]]
    written = [0, 0, 0]
    g = H//Hkv; gT = g*T; nb = B*Hkv
    sq, skv, satt = gT*hd, T*hd, gT*T
    dy = np.zeros(B*T*C); permute(dy, datty, B, T, H, hd, C, 0)
    datt = np.zeros(B*H*T*T)
    lt(datt, v, dy, None, T, gT, hd, 1, 0, hd, hd, T, 1.0, 0.0, nb, skv, sq, satt)
    lt(dv, dy, att, None, hd, T, gT, 0, 1, hd, T, hd, 1.0, 1.0 if written[own[2]] else 0.0, nb, sq, satt, skv); written[own[2]] = 1
    softmax_bwd(datt, att, B*H*T, T, scale)
    lt(dq, k, datt, None, hd, gT, T, 0, 0, hd, T, hd, 1.0, 1.0 if written[own[0]] else 0.0, nb, skv, satt, sq); written[own[0]] = 1
    lt(dk, q, datt, None, hd, T, gT, 0, 1, hd, T, hd, 1.0, 1.0 if written[own[1]] else 0.0, nb, sq, satt, skv); written[own[1]] = 1
    wrote = 0
    for r in range(3):
        if own[r] != r: continue
        src, off, ch = roles[r]
        if src == PROJ: unpermute(dqkv, dperm[r], B, T, nh[r], hd, W, off, 0)
        elif src == INP: unpermute(dx, dperm[r], B, T, nh[r], hd, C, 0, wrote); wrote = 1
        else: unpermute(dqres, dperm[r], B, T, nh[r], hd, C, 0, 0)
    return wrote

def check(scheme, B, T, C, H, Hkv):
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
    # emulation, mirroring gpt2_forward/gpt2_backward
    N = B*T
    qkv = np.zeros(N*W); matmul_forward(qkv, x.ravel(), w.ravel(), b, N, C, W)
    sizes = [N*C, N*KV, N*KV]
    perm = [np.zeros(sizes[r]) if own[r] == r else None for r in range(3)]
    atty = np.zeros(N*C)
    att = attention_forward(atty, perm, x.ravel(), qkv, qres.ravel() if qres is not None else None, B, T, C, H, Hkv, hd, scale, W, roles, own)
    dperm = [np.zeros(sizes[r]) if own[r] == r else None for r in range(3)]
    dqkv = np.zeros(N*W); dx = np.zeros(N*C); dqres = np.zeros(N*C)
    wrote = attention_backward(dqkv, dx, dqres, dperm, G.ravel(), perm, att, B, T, C, H, Hkv, hd, scale, W, roles, own)
    dw = np.zeros(W*C); db = np.zeros(W)
    matmul_backward(dx, dw, db, dqkv, x.ravel(), w.ravel(), N, C, W, 1.0 if wrote else 0.0)
    errs = {
        'atty': np.abs(atty - atty_ref.detach().numpy().ravel()).max(),
        'att': np.abs(att - att_ref.detach().numpy().ravel()).max(),
        'dx': np.abs(dx - xt.grad.numpy().ravel()).max(),
        'dw': np.abs(dw - wt.grad.numpy().ravel()).max(),
        'db': np.abs(db - bt.grad.numpy().ravel()).max(),
    }
    if qres is not None: errs['dqres'] = np.abs(dqres - qrt.grad.numpy().ravel()).max()
    worst = max(errs.values())
    print("%s %s B=%d T=%d C=%d H=%d Hkv=%d owners=%s max abs err %.2e" % ("PASS" if worst < 1e-10 else "FAIL", scheme, B, T, C, H, Hkv, own, worst))
    return worst < 1e-10

ok = True
for scheme in ['standard', 'q_identity', 'k_identity', 'v_identity', 'kv_shared', 'qk_shared', 'qkv_shared', 'q_residual']:
    hkvs = [4, 2, 1] if scheme in ('standard', 'q_identity', 'kv_shared', 'q_residual') else [4]
    for Hkv in hkvs:
        ok &= check(scheme, 2, 5, 12, 4, Hkv)
# linear layer alone, with bias, non-square
N, C, OC = 7, 5, 3
x = rng.standard_normal((N, C)); w = rng.standard_normal((OC, C)); b = rng.standard_normal(OC); G = rng.standard_normal((N, OC))
out = np.zeros(N*OC); matmul_forward(out, x.ravel(), w.ravel(), b, N, C, OC)
e1 = np.abs(out - (x @ w.T + b).ravel()).max()
out2 = np.zeros(N*OC); matmul_forward(out2, x.ravel(), w.ravel(), b, N, C, OC, fuse=False)
e1 = max(e1, np.abs(out2 - (x @ w.T + b).ravel()).max())
dinp = np.zeros(N*C); dw = np.zeros(OC*C); db = np.zeros(OC)
matmul_backward(dinp, dw, db, G.ravel(), x.ravel(), w.ravel(), N, C, OC, 0.0)
e2 = max(np.abs(dinp - (G @ w).ravel()).max(), np.abs(dw - (G.T @ x).ravel()).max(), np.abs(db - G.sum(0)).max())
print("%s linear forward/backward max abs err %.2e %.2e" % ("PASS" if max(e1, e2) < 1e-12 else "FAIL", e1, e2))
sys.exit(0 if ok and max(e1, e2) < 1e-12 else 1)
