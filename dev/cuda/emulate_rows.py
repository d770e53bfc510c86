# Checks, in float64 numpy/torch, the per-row formulas and the work partition (which thread or block
# takes which row, column and pack) of train_gpt2.cu's row kernels against autograd:
#   residual_layernorm_forward_kernel, rmsnorm_forward_kernel, norm_backward_kernel (dx, dweight and
#   dbias in one kernel, LayerNorm / RMSNorm / LayerNorm without bias), bias_backward_kernel,
#   gelu_tanh / gelu_tanh_grad, softmax_stats_merge and fused_classifier_kernel (online max/sum over
#   packs, warp butterflies, dlogits in place).
# Transcribed by hand from the kernels (names and loops as in the C code): keep in step with them.
# What it proves: the formulas and the index arithmetic, in exact-ish float64 (plus one float32 run
# of the classifier's online softmax). What it does not: rounding to bf16, the memory model, timing;
# dev/cuda/kernel_emulator.sh runs the kernels' own text for that.
# Run: /usr/bin/python3 dev/cuda/emulate_rows.py  (one PASS/FAIL line per check, exit 1 on a FAIL).
# emulate_matmuls.py imports fused_classifier_kernel from here.
import math, sys
import numpy as np, torch
torch.set_default_dtype(torch.float64)
F = torch.nn.functional
NEG_INF = -math.inf
RESULTS = []


def report(name, err, tol):
    ok = bool(np.isfinite(err)) and err <= tol
    print("%s %s max err %.2e (tol %.0e)" % ("PASS" if ok else "FAIL", name, err, tol))
    RESULTS.append(ok)
    return ok


def maxerr(a, b):
    a = np.asarray(a, dtype=np.float64); b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape: return math.inf
    if a.size == 0: return 0.0
    d = np.abs(a - b)
    return math.inf if np.isnan(d).any() else float(d.max())


# ---------------------------------------------------------------------------------------------
# gelu_tanh, gelu_tanh_grad (section "kernels: elementwise")
GELU_SCALE = 0.7978845608028654


def gelu_tanh(x):
    u = GELU_SCALE * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + np.tanh(u))


def gelu_tanh_grad(x):
    u = GELU_SCALE * (x + 0.044715 * x * x * x)
    th = np.tanh(u)
    du = GELU_SCALE * (1.0 + 3.0 * 0.044715 * x * x)
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du


# ---------------------------------------------------------------------------------------------
# residual_layernorm_forward_kernel / rmsnorm_forward_kernel: one warp per row, lane takes the packs
# c = lane * P + j * 32 * P. Returns the per-row sums in the kernel's order of channels (coverage
# is checked by the caller through `seen`).
def lane_packs(C, P):
    step = 32 * P
    return [list(range(lane * P, C, step)) for lane in range(32)]


def residual_layernorm_forward_kernel(residual, out, mean, rstd, inp1, inp2, weight, bias, N, C, P, seen):
    for row in range(N):
        base = row * C
        src = residual if inp2 is not None else inp1
        lane_s = []
        for lane, cs in enumerate(lane_packs(C, P)):
            s = 0.0
            for c in cs:
                if inp2 is not None:
                    residual[base + c:base + c + P] = inp1[base + c:base + c + P] + inp2[base + c:base + c + P]
                v = src[base + c:base + c + P]
                seen[base + c:base + c + P] += 1
                s += v.sum()
            lane_s.append(s)
        m = sum(lane_s) / C
        var = 0.0
        for cs in lane_packs(C, P):
            for c in cs: var += ((src[base + c:base + c + P] - m) ** 2).sum()
        r = 1.0 / math.sqrt(var / C + 1e-5)  # biased variance, like GPT-2
        for cs in lane_packs(C, P):
            for c in cs:
                v = src[base + c:base + c + P]; w = weight[c:c + P]
                o = (v - m) * r * w
                if bias is not None: o = o + bias[c:c + P]
                out[base + c:base + c + P] = o
        mean[row] = m; rstd[row] = r


def rmsnorm_forward_kernel(out, rstd, inp, weight, N, C, P):
    for row in range(N):
        x = inp[row * C:(row + 1) * C]
        s = 0.0
        for cs in lane_packs(C, P):
            for c in cs: s += (x[c:c + P] ** 2).sum()
        r = 1.0 / math.sqrt(s / C + 1e-5)
        for cs in lane_packs(C, P):
            for c in cs: out[row * C + c:row * C + c + P] = x[c:c + P] * r * weight[c:c + P]
        rstd[row] = r


# ---------------------------------------------------------------------------------------------
# norm_backward_kernel<PACKS> as norm_backward launches it: grid = min(ceil(N / warps), reduce_blocks,
# REDUCE_MAX_BLOCKS), 256 threads; warp w of block b takes rows b * nwarps + w + k * grid * nwarps;
# lane takes channels (j * 32 + lane) * P, j < PACKS; per-block sums (warp order) into partial
# (grid, 2, C); the last block adds the partials in block order into dweight / dbias.
NORM_BACKWARD_THREADS, REDUCE_MAX_BLOCKS, NORM_BACKWARD_MAX_PACKS = 256, 512, 8


def norm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, accumulate, P, reduce_blocks, seen=None):
    packs = (C + 32 * P - 1) // (32 * P)
    assert packs <= NORM_BACKWARD_MAX_PACKS, "norm_backward: more channels than the kernel's cases"
    assert C % P == 0
    warps = NORM_BACKWARD_THREADS // 32
    grid = (N + warps - 1) // warps
    grid = min(grid, reduce_blocks, REDUCE_MAX_BLOCKS)
    nwarps = warps
    partial = np.full(grid * 2 * C, np.nan)
    for b in range(grid):
        acc_n = np.zeros((nwarps, C)); acc_b = np.zeros((nwarps, C))  # per warp, per lane's channels
        for warp in range(nwarps):
            row = b * nwarps + warp
            while row < N:
                base = row * C
                m = mean[row] if mean is not None else 0.0
                r = rstd[row]
                sum_dn = 0.0; sum_dn_n = 0.0
                cols = []
                for j in range(packs):
                    for lane in range(32):
                        c = (j * 32 + lane) * P
                        if c >= C: continue
                        cols.append(c)
                        x = inp[base + c:base + c + P]; d = dout[base + c:base + c + P]; w = weight[c:c + P]
                        n = (x - m) * r; dn = d * w
                        sum_dn += dn.sum(); sum_dn_n += (dn * n).sum()
                mean_dn = sum_dn / C if mean is not None else 0.0
                mean_dn_n = sum_dn_n / C
                for c in cols:
                    x = inp[base + c:base + c + P]; d = dout[base + c:base + c + P]; w = weight[c:c + P]
                    n = (x - m) * r
                    v = r * (d * w - mean_dn - n * mean_dn_n)
                    if accumulate: v = v + dinp[base + c:base + c + P]
                    dinp[base + c:base + c + P] = v
                    acc_n[warp, c:c + P] += d * n
                    acc_b[warp, c:c + P] += d
                    if seen is not None: seen[base + c:base + c + P] += 1
                row += grid * nwarps
        s_sums = np.zeros(2 * C)
        for w in range(nwarps):  # warp 0 writes, warps 1.. add, in warp order
            s_sums[:C] = (0.0 if w == 0 else s_sums[:C]) + acc_n[w]
            s_sums[C:] = (0.0 if w == 0 else s_sums[C:]) + acc_b[w]
        partial[b * 2 * C:(b + 1) * 2 * C] = s_sums
    tot = np.zeros(2 * C)
    for b in range(grid): tot += partial[b * 2 * C:(b + 1) * 2 * C]
    dweight[:] += tot[:C]
    if dbias is not None: dbias[:] += tot[C:]


# ---------------------------------------------------------------------------------------------
# bias_backward_kernel as bias_backward launches it: blocks (col_groups, row_shares), threads
# (32, BIAS_ROW_LANES); thread x takes columns c0 = (blockIdx.x * 32 + x) * P .. + P (element by
# element when OC % P != 0), thread y rows blockIdx.y * lanes + y + k * gridDim.y * lanes.
BIAS_ROW_LANES = 8


def bias_backward(dbias, dout, N, OC, P, reduce_blocks, seen=None):
    col_groups = (OC + 32 * P - 1) // (32 * P)
    row_shares = reduce_blocks // col_groups
    max_shares = (N + BIAS_ROW_LANES - 1) // BIAS_ROW_LANES
    row_shares = max(1, min(row_shares, max_shares, REDUCE_MAX_BLOCKS))
    partial = np.full(row_shares * OC, np.nan)
    for bx in range(col_groups):
        for by in range(row_shares):
            s_acc = np.zeros((BIAS_ROW_LANES, 32 * P))
            for ty in range(BIAS_ROW_LANES):
                for tx in range(32):
                    c0 = (bx * 32 + tx) * P
                    if c0 >= OC: continue
                    kmax = min(P, OC - c0)  # packed: OC % P == 0, so kmax == P
                    row = by * BIAS_ROW_LANES + ty
                    while row < N:
                        s_acc[ty, tx * P:tx * P + kmax] += dout[row * OC + c0:row * OC + c0 + kmax]
                        if seen is not None: seen[row * OC + c0:row * OC + c0 + kmax] += 1
                        row += row_shares * BIAS_ROW_LANES
            for tx in range(32):
                c0 = (bx * 32 + tx) * P
                if c0 >= OC: continue
                kmax = min(P, OC - c0)
                acc = s_acc[0, tx * P:tx * P + kmax].copy()
                for y in range(1, BIAS_ROW_LANES): acc += s_acc[y, tx * P:tx * P + kmax]
                partial[by * OC + c0:by * OC + c0 + kmax] = acc
        for tx in range(32):  # the group's last block
            c0 = (bx * 32 + tx) * P
            if c0 >= OC: continue
            kmax = min(P, OC - c0)
            tot = np.zeros(kmax)
            for b in range(row_shares): tot += partial[b * OC + c0:b * OC + c0 + kmax]
            dbias[c0:c0 + kmax] += tot


# ---------------------------------------------------------------------------------------------
# softmax_stats_merge and fused_classifier_kernel. `f` is the float type of the arithmetic
# (np.float64, or np.float32 for a run in the kernel's precision).
def softmax_stats_merge(m, s, m2, s2, f=np.float64):
    mm = max(m, m2)  # fmaxf (no NaN here)
    if mm == NEG_INF: return m, s  # both empty
    s = f(f(s * f(np.exp(f(m - mm)))) + f(s2 * f(np.exp(f(m2 - mm)))))
    return mm, s


def warp_butterfly(lanes, f):
    # for (off = 16; off > 0; off >>= 1) { m2, s2 = shfl_xor(m, s, off); merge }: every lane at once
    for off in (16, 8, 4, 2, 1):
        lanes = [softmax_stats_merge(lanes[l][0], lanes[l][1], lanes[l ^ off][0], lanes[l ^ off][1], f) for l in range(32)]
    return lanes


def fused_classifier_kernel(logits, losses, targets, N, V, Vp, dloss, write_dlogits, block=1024, P=8, f=np.float64,
                            lse_out=None, seen=None, stats_out=None):
    # <<<N, block>>>: one block per row; logits (N, Vp) flat, overwritten in place with dlogits
    assert Vp % P == 0 and block % 32 == 0 and block <= 1024 and V <= Vp
    nwarps = block // 32
    for row in range(N):
        x = logits[row * Vp:(row + 1) * Vp]  # a view: writes go to logits
        target = int(targets[row])
        s_target_logit = f(x[target])
        pairs = []
        for t in range(block):
            m, s = NEG_INF, f(0.0)
            for i in range(t * P, V, block * P):
                v = np.array(x[i:i + P], dtype=f)  # load128cs: the whole pack, i + P <= Vp
                assert v.size == P
                pm = NEG_INF
                for k in range(P):
                    if i + k < V: pm = max(pm, v[k])
                ps = f(0.0)
                for k in range(P):
                    if i + k < V: ps = f(ps + f(np.exp(f(v[k] - pm))))
                if seen is not None: seen[0][row * Vp + i:row * Vp + min(i + P, V)] += 1
                m, s = softmax_stats_merge(m, s, pm, ps, f)
            pairs.append((m, s))
        s_m = []
        for w in range(nwarps):
            lanes = warp_butterfly(pairs[w * 32:(w + 1) * 32], f)
            assert all(l == lanes[0] for l in lanes), "butterfly: lanes of a warp disagree"
            s_m.append(lanes[0])
        lanes = [s_m[l] if l < nwarps else (NEG_INF, f(0.0)) for l in range(32)]
        lanes = warp_butterfly(lanes, f)
        assert all(l == lanes[0] for l in lanes), "butterfly: lanes of the block disagree"
        m, s = lanes[0]
        lse = f(m + f(np.log(s)))
        if lse_out is not None: lse_out[row] = lse
        if stats_out is not None: stats_out.append((m, s))
        losses[row] = f(lse - s_target_logit)
        if not write_dlogits: continue
        for t in range(block):
            for i in range(t * P, Vp, block * P):
                v = np.array(x[i:i + P], dtype=f)
                d = np.zeros(P)
                for k in range(P):
                    col = i + k
                    d[k] = f(f(f(np.exp(f(v[k] - lse))) - (1.0 if col == target else 0.0)) * f(dloss)) if col < V else 0.0
                x[i:i + P] = d
                if seen is not None: seen[1][row * Vp + i:row * Vp + i + P] += 1


# ---------------------------------------------------------------------------------------------
def check_norms(rng):
    for (N, C, P, blocks) in [(70, 48, 8, 3), (9, 136, 4, 2), (33, 8, 8, 264)]:
        tag = "N=%d C=%d pack=%d reduce_blocks=%d" % (N, C, P, blocks)
        x1 = rng.standard_normal((N, C)); x2 = rng.standard_normal((N, C))
        w = 1 + 0.1 * rng.standard_normal(C); bia = rng.standard_normal(C); G = rng.standard_normal((N, C))
        # residual_layernorm_forward_kernel with inp2, then without (layernorm_forward)
        residual = np.full(N * C, np.nan); out = np.full(N * C, np.nan); mean = np.full(N, np.nan); rstd = np.full(N, np.nan)
        seen = np.zeros(N * C)
        residual_layernorm_forward_kernel(residual, out, mean, rstd, x1.ravel(), x2.ravel(), w, bia, N, C, P, seen)
        ref = F.layer_norm(torch.tensor(x1 + x2), (C,), torch.tensor(w), torch.tensor(bia), 1e-5).numpy()
        e = max(maxerr(out, ref.ravel()), maxerr(residual, (x1 + x2).ravel()), maxerr(seen, np.ones(N * C)))
        out2 = np.full(N * C, np.nan); mean2 = np.full(N, np.nan); rstd2 = np.full(N, np.nan)
        residual_layernorm_forward_kernel(None, out2, mean2, rstd2, x1.ravel(), None, w, None, N, C, P, np.zeros(N * C))
        ref2 = F.layer_norm(torch.tensor(x1), (C,), torch.tensor(w), None, 1e-5).numpy()
        e = max(e, maxerr(out2, ref2.ravel()))
        report("residual_layernorm_forward_kernel (with and without inp2, bias) " + tag, e, 1e-12)
        # norm_backward_kernel, LayerNorm with bias; prior contents in dinp (accumulate) and dweight/dbias
        xt = torch.tensor(x1, requires_grad=True); wt = torch.tensor(w, requires_grad=True); bt = torch.tensor(bia, requires_grad=True)
        (F.layer_norm(xt, (C,), wt, bt, 1e-5) * torch.tensor(G)).sum().backward()
        mean = x1.mean(1); rstd = 1 / np.sqrt(((x1 - mean[:, None]) ** 2).mean(1) + 1e-5)
        for accumulate in (0, 1):
            prev = rng.standard_normal(N * C); dw0 = rng.standard_normal(C); db0 = rng.standard_normal(C)
            dinp = prev.copy() if accumulate else np.full(N * C, np.nan)
            dweight = dw0.copy(); dbias = db0.copy(); seen = np.zeros(N * C)
            norm_backward(dinp, dweight, dbias, G.ravel(), x1.ravel(), w, mean, rstd, N, C, accumulate, P, blocks, seen)
            e = max(maxerr(dinp, xt.grad.numpy().ravel() + (prev if accumulate else 0.0)), maxerr(dweight, dw0 + wt.grad.numpy()),
                    maxerr(dbias, db0 + bt.grad.numpy()), maxerr(seen, np.ones(N * C)))
            report("norm_backward_kernel LayerNorm accumulate=%d %s" % (accumulate, tag), e, 1e-12)
        # LayerNorm without bias (q_residual's LN_q: norm_backward(.., dbias NULL, ..))
        xt = torch.tensor(x1, requires_grad=True); wt = torch.tensor(w, requires_grad=True)
        (F.layer_norm(xt, (C,), wt, None, 1e-5) * torch.tensor(G)).sum().backward()
        dinp = np.full(N * C, np.nan); dweight = np.zeros(C)
        norm_backward(dinp, dweight, None, G.ravel(), x1.ravel(), w, mean, rstd, N, C, 0, P, blocks)
        report("norm_backward_kernel LayerNorm dbias=NULL " + tag,
               max(maxerr(dinp, xt.grad.numpy().ravel()), maxerr(dweight, wt.grad.numpy())), 1e-12)
        # RMSNorm: rmsnorm_forward_kernel, norm_backward_kernel with mean NULL, dbias NULL, accumulate 1
        xt = torch.tensor(x1, requires_grad=True); wt = torch.tensor(w, requires_grad=True)
        yt = xt / torch.sqrt((xt * xt).mean(-1, keepdim=True) + 1e-5) * wt
        (yt * torch.tensor(G)).sum().backward()
        out = np.full(N * C, np.nan); rstd = np.full(N, np.nan)
        rmsnorm_forward_kernel(out, rstd, x1.ravel(), w, N, C, P)
        prev = rng.standard_normal(N * C); dinp = prev.copy(); dweight = np.zeros(C)
        norm_backward(dinp, dweight, None, G.ravel(), x1.ravel(), w, None, rstd, N, C, 1, P, blocks)
        e = max(maxerr(out, yt.detach().numpy().ravel()), maxerr(dinp, prev + xt.grad.numpy().ravel()), maxerr(dweight, wt.grad.numpy()))
        report("rmsnorm_forward_kernel + norm_backward_kernel RMSNorm accumulate=1 " + tag, e, 1e-12)


def check_bias_backward(rng):
    for (N, OC, P, blocks) in [(70, 48, 8, 3), (9, 20, 8, 264), (33, 600, 4, 5), (5, 3, 8, 1)]:
        G = rng.standard_normal((N, OC)); db0 = rng.standard_normal(OC)
        dbias = db0.copy(); seen = np.zeros(N * OC)
        bias_backward(dbias, G.ravel(), N, OC, P, blocks, seen)
        e = max(maxerr(dbias, db0 + G.sum(0)), maxerr(seen, np.ones(N * OC)))
        report("bias_backward_kernel N=%d OC=%d pack=%d reduce_blocks=%d (%s)" % (N, OC, P, blocks,
               "packed" if OC % P == 0 else "element by element"), e, 1e-12)


def check_gelu(rng):
    x = np.concatenate([rng.standard_normal(200) * 3, [0.0, -10.0, 10.0, 1e-8]])
    xt = torch.tensor(x, requires_grad=True); G = rng.standard_normal(x.size)
    y = F.gelu(xt, approximate='tanh'); (y * torch.tensor(G)).sum().backward()
    e = max(maxerr(gelu_tanh(x), y.detach().numpy()), maxerr(gelu_tanh_grad(x) * G, xt.grad.numpy()))
    report("gelu_tanh / gelu_tanh_grad vs F.gelu(approximate='tanh')", e, 1e-14)


def two_pass_lse(row):
    m = row.max()
    return m + math.log(np.exp(row - m).sum())


def check_classifier(rng):
    # the whole kernel at the trainer's launch (<<<N, 1024>>>, 8 bf16 per pack) vs cross_entropy
    for (N, V, Vp, block, P) in [(6, 7, 8, 1024, 8), (5, 50, 64, 1024, 8), (4, 300, 304, 64, 4), (3, 2000, 2048, 32, 8)]:
        lg = rng.standard_normal((N, Vp)) * 2; tg = rng.integers(0, V, N)
        lg[:, V:] = 50.0  # padded columns: whatever the padded head rows give; must be ignored
        tg[0] = V - 1
        dloss = 1.0 / N
        lt_ = torch.tensor(lg[:, :V], requires_grad=True)
        F.cross_entropy(lt_, torch.tensor(tg)).backward()
        ref_losses = F.cross_entropy(torch.tensor(lg[:, :V]), torch.tensor(tg), reduction='none').numpy()
        logits = lg.ravel().copy(); losses = np.full(N, np.nan)
        seen = (np.zeros(N * Vp), np.zeros(N * Vp))
        fused_classifier_kernel(logits, losses, tg, N, V, Vp, dloss, 1, block, P, seen=seen)
        d = logits.reshape(N, Vp)
        stat_cov = np.concatenate([np.ones((N, V)), np.zeros((N, Vp - V))], 1).ravel()
        e = max(maxerr(losses, ref_losses), maxerr(d[:, :V], lt_.grad.numpy()), maxerr(d[:, V:], np.zeros((N, Vp - V))),
                maxerr(seen[0], stat_cov), maxerr(seen[1], np.ones(N * Vp)))
        report("fused_classifier_kernel N=%d V=%d Vp=%d block=%d pack=%d vs cross_entropy (losses, dlogits, padded 0)"
               % (N, V, Vp, block, P), e, 1e-13)
        # write_dlogits = 0: losses only, logits untouched
        logits = lg.ravel().copy(); losses = np.full(N, np.nan)
        fused_classifier_kernel(logits, losses, tg, N, V, Vp, dloss, 0, block, P)
        report("fused_classifier_kernel write_dlogits=0 N=%d V=%d (losses, logits untouched)" % (N, V),
               max(maxerr(losses, ref_losses), maxerr(logits, lg.ravel())), 1e-13)


def check_online_merge(rng):
    # the online (max, sum) of fused_classifier_kernel (per pack, per thread, butterflies) against the
    # two-pass lse, rows chosen to stress the rescaling. block 64 threads x pack 8 = 512 columns per
    # sweep: V 1500 gives each thread 2 or 3 packs and a partial last pack.
    V, Vp, block, P = 1500, 1504, 64, 8
    rows = []
    rows.append(("random", rng.standard_normal(V)))
    r = rng.standard_normal(V) * 1e4; rows.append(("huge values (|x| ~ 1e4, exp overflows without the max)", r))
    r = rng.standard_normal(V); r[V - 1] = 40.0; rows.append(("max in the last (partial) pack, at column V-1", r))
    r = rng.standard_normal(V); r[(V // P) * P - 1] = 40.0; rows.append(("max in the last full pack", r))
    r = np.linspace(-30, 30, V); rows.append(("increasing (the max grows at every pack)", r))
    r = np.linspace(30, -30, V); rows.append(("decreasing (the max is in the first pack)", r))
    rows.append(("constant", np.full(V, 3.25)))
    r = rng.standard_normal(V) * 1e-3 + 700.0; rows.append(("all near 700 (exp(x) alone overflows float32)", r))
    r = rng.standard_normal(V) * 1e30; rows.append(("|x| ~ 1e30 (float32 range, lse = max)", r))
    r = np.full(V, -1e4); r[777] = 0.0; rows.append(("one dominant value (sum ~ 1)", r))
    N = len(rows)
    lg = np.full((N, Vp), 1e6)  # padded columns larger than any real one: must not count
    for i, (_, r) in enumerate(rows): lg[i, :V] = r
    tg = rng.integers(0, V, N)
    lse = np.full(N, np.nan); losses = np.full(N, np.nan); stats = []
    fused_classifier_kernel(lg.ravel().copy(), losses, tg, N, V, Vp, 1.0, 0, block, P, lse_out=lse, stats_out=stats)
    for i, (name, r) in enumerate(rows):
        ref = two_pass_lse(r)
        m_ref = r.max(); s_ref = np.exp(r - m_ref).sum()
        m, s = stats[i]
        # the lse, and the pair itself: the max exactly, the sum of exp(x - max) to a relative 1e-12
        err = max(abs(lse[i] - ref) / max(1.0, abs(ref)), abs(s - s_ref) / s_ref, 0.0 if m == m_ref else math.inf)
        report("softmax_stats_merge online (max, sum) and lse == two-pass (float64), %s" % name, err, 1e-12)
    # the same rows in float32 arithmetic (the kernel's): relative to the float64 two-pass lse
    lse32 = np.full(N, np.nan)
    fused_classifier_kernel(lg.astype(np.float32).ravel(), np.full(N, np.nan), tg, N, V, Vp, 1.0, 0, block, P,
                            f=np.float32, lse_out=lse32)
    worst = 0.0
    for i, (name, r) in enumerate(rows):
        ref = two_pass_lse(r.astype(np.float32).astype(np.float64))
        worst = max(worst, abs(lse32[i] - ref) / max(1.0, abs(ref)))
    report("softmax_stats_merge online lse in float32 arithmetic vs two-pass float64 (all %d rows)" % N, worst, 2e-6)
    # the merge itself: empty pairs, order, and associativity against the union's two-pass value
    x = rng.standard_normal(40) * 5
    a, b = x[:17], x[17:]
    pa = (a.max(), np.exp(a - a.max()).sum()); pb = (b.max(), np.exp(b - b.max()).sum())
    m1, s1 = softmax_stats_merge(pa[0], pa[1], pb[0], pb[1])
    m2, s2 = softmax_stats_merge(pb[0], pb[1], pa[0], pa[1])
    m3, s3 = softmax_stats_merge(NEG_INF, 0.0, m1, s1)
    m4, s4 = softmax_stats_merge(m1, s1, NEG_INF, 0.0)
    m5, s5 = softmax_stats_merge(NEG_INF, 0.0, NEG_INF, 0.0)
    ref = two_pass_lse(x)
    e = max(abs(m1 + math.log(s1) - ref), abs(m2 + math.log(s2) - ref), abs(m3 + math.log(s3) - ref),
            abs(m4 + math.log(s4) - ref), 0.0 if (m5 == NEG_INF and s5 == 0.0) else math.inf)
    report("softmax_stats_merge: union of two pairs, both orders, with the empty pair (-inf, 0)", e, 1e-13)


def check_trainer_partitions():
    # index coverage at the trainer's real shapes (fast: numpy, no arithmetic): every channel of a row
    # exactly once in the norm kernels' lane loops, every column in the classifier's loops, every
    # column group in bias_backward_kernel
    bad = []
    for P in (8, 4):
        for C in (8, 48, 64, 136, 768, 1024, 1600, 2048):
            if C % P or (C + 32 * P - 1) // (32 * P) > NORM_BACKWARD_MAX_PACKS: continue
            cov = np.zeros(C, dtype=int)
            for cs in lane_packs(C, P):
                for c in cs: cov[c:c + P] += 1
            cov2 = np.zeros(C, dtype=int)
            for j in range((C + 32 * P - 1) // (32 * P)):
                for lane in range(32):
                    c = (j * 32 + lane) * P
                    if c < C: cov2[c:c + P] += 1
            if (cov != 1).any() or (cov2 != 1).any(): bad.append(("norm", C, P))
            if 2 * C > 2 * 2048: bad.append(("NORM_BACKWARD_MAX_C", C, P))
        for (V, Vp) in ((50257, 50304), (50, 64), (7, 8)):
            if Vp % P: continue
            c1 = np.zeros(Vp, dtype=int); c2 = np.zeros(Vp, dtype=int)
            for t in range(1024):
                for i in range(t * P, V, 1024 * P): c1[i:min(i + P, V)] += 1
                for i in range(t * P, Vp, 1024 * P): c2[i:i + P] += 1
            if (c1[:V] != 1).any() or (c1[V:] != 0).any() or (c2 != 1).any(): bad.append(("classifier", V, P))
    report("index coverage at trainer shapes (norm lanes C<=2048, classifier V=50257/Vp=50304, packs 8 and 4)",
           0.0 if not bad else math.inf, 0.0)
    if bad: print("  uncovered:", bad)


def run_check(fn, *args):
    # an exception (an assertion of a transcribed precondition, an index out of range) is a FAIL line
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        print("FAIL %s raised %s: %s" % (fn.__name__, type(e).__name__, e))
        RESULTS.append(False)


def main():
    rng = np.random.default_rng(1)
    run_check(check_norms, rng)
    run_check(check_bias_backward, rng)
    run_check(check_gelu, rng)
    run_check(check_classifier, rng)
    run_check(check_online_merge, rng)
    run_check(check_trainer_partitions)
    print("%d checks, %d FAIL" % (len(RESULTS), RESULTS.count(False)))
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
