# Checks, in float64 numpy/torch, the per-row formulas of train_gpt2.cu's kernels (RMSNorm and LayerNorm
# backward, GELU backward, the fused classifier) against autograd. Transcribed by hand from the
# kernels: keep in step with them. Run: /usr/bin/python3 dev/cuda/emulate_rows.py
import numpy as np, torch, math
torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(1)
N, C = 6, 10
x = rng.standard_normal((N, C)); w = 1 + 0.1*rng.standard_normal(C); bia = rng.standard_normal(C); G = rng.standard_normal((N, C))
def norm_backward(dout, inp, weight, mean, rstd):  # mirrors norm_backward_kernel + column_sums
    dx = np.zeros_like(inp); dg = np.zeros(C); db = np.zeros(C)
    for row in range(N):
        m = mean[row] if mean is not None else 0.0; r = rstd[row]
        n = (inp[row]-m)*r; dn = dout[row]*weight
        mean_dn = dn.mean() if mean is not None else 0.0; mean_dn_n = (dn*n).mean()
        dx[row] = r*(dn - mean_dn - n*mean_dn_n)
        dg += dout[row]*n; db += dout[row]
    return dx, dg, db
# LayerNorm
xt = torch.tensor(x, requires_grad=True); wt = torch.tensor(w, requires_grad=True); bt = torch.tensor(bia, requires_grad=True)
mu = xt.mean(-1, keepdim=True); var = ((xt-mu)**2).mean(-1, keepdim=True)
((( (xt-mu)/torch.sqrt(var+1e-5))*wt + bt)*torch.tensor(G)).sum().backward()
mean = x.mean(1); rstd = 1/np.sqrt(((x-mean[:, None])**2).mean(1)+1e-5)
dx, dg, db = norm_backward(G, x, w, mean, rstd)
print("LN", np.abs(dx-xt.grad.numpy()).max(), np.abs(dg-wt.grad.numpy()).max(), np.abs(db-bt.grad.numpy()).max())
# RMSNorm
xt = torch.tensor(x, requires_grad=True); wt = torch.tensor(w, requires_grad=True)
((xt/torch.sqrt((xt*xt).mean(-1, keepdim=True)+1e-5)*wt)*torch.tensor(G)).sum().backward()
rstd = 1/np.sqrt((x*x).mean(1)+1e-5)
dx, dg, _ = norm_backward(G, x, w, None, rstd)
print("RMS", np.abs(dx-xt.grad.numpy()).max(), np.abs(dg-wt.grad.numpy()).max())
# GELU
K = 0.7978845608028654
xt = torch.tensor(x, requires_grad=True)
(0.5*xt*(1+torch.tanh(K*(xt+0.044715*xt**3)))*torch.tensor(G)).sum().backward()
u = K*(x+0.044715*x**3); th = np.tanh(u); du = K*(1+3*0.044715*x*x)
gr = 0.5*(1+th)+0.5*x*(1-th*th)*du
print("GELU", np.abs(gr*G - xt.grad.numpy()).max())
# classifier: dlogits = (softmax - onehot) * dloss, loss = lse - x[target]
V, Vp = 7, 8
lg = rng.standard_normal((N, V)); tg = rng.integers(0, V, N)
lt_ = torch.tensor(lg, requires_grad=True)
loss = torch.nn.functional.cross_entropy(lt_, torch.tensor(tg)); loss.backward()
m = lg.max(1, keepdims=True); s = np.exp(lg-m).sum(1, keepdims=True); lse = m+np.log(s)
losses = lse[:, 0] - lg[np.arange(N), tg]
d = (np.exp(lg-lse) - np.eye(V)[tg]) / N
print("CLS", abs(losses.mean()-loss.item()), np.abs(d-lt_.grad.numpy()).max())
