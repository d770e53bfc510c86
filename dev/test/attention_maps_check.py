"""
attention_maps_check.py: the checks dev/test/test_attention_maps.sh makes on the trainers' maps files
(dev/FORMATS.md, "Attention maps"), through dev/tools/attention_maps.py's reader. One PASS/FAIL line
per check, the numbers in it.

  verify MAPS CSV [--symmetric] [--tokens 1,2,3] [--tol 1e-5]
      the maps are what their definitions say: each row of probabilities sums to 1 with zeros above
      the diagonal and equals the causal softmax of its scores (--tol, relative); the induction
      probe is [eot, r, r]; the CSV's diagnostics equal numpy's own of the maps (a second
      implementation of dev/trainer/attention_maps.h's definitions); --symmetric: every score map equals its
      transpose bit for bit (Q = K; --symmetric_tol X: within X relative, for a GPU's cuBLASLt), else at
      least one does not; --tokens: the prompt's tokens
  compare A B --tol X [--name NAME]
      two maps files of one checkpoint and prompt (the CPU and the CUDA trainer): the same header and
      tokens, and per sequence ||a - b|| / ||b|| of the probabilities and of the scores below X
"""
import argparse
import csv
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import attention_maps  # noqa: E402

failures = 0


def report(ok, text):
    global failures
    print(f"{'PASS' if ok else 'FAIL'} {text}")
    failures += not ok


def diagnostics(probs, scores, kind, repeat):
    """numpy's diagnostics of one (T, T) map, from the definitions in dev/trainer/attention_maps.h."""
    T = probs.shape[0]
    p = probs.astype(np.float64)
    t = np.arange(T)
    out = {}
    if kind == "prompt":
        with np.errstate(divide="ignore", invalid="ignore"):
            out["entropy"] = float(np.mean(-np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0), axis=1)))
        out["distance"] = float(np.mean(np.sum(p * (t[:, None] - t[None, :]), axis=1)))
        out["sink"] = float(np.mean(p[:, 0]))
        out["prev_token"] = float(np.mean(p[t[1:], t[1:] - 1])) if T > 1 else 0.0
        s = scores.astype(np.float64)
        norm = np.sqrt(np.sum(s * s))
        out["asymmetry"] = float(np.sqrt(np.sum((s - s.T) ** 2)) / norm) if norm > 0 else 0.0
    else:
        q = np.arange(repeat + 1, 2 * repeat + 1)
        out["induction"] = float(np.mean(p[q, q - repeat + 1]))
    return out


def verify(args):
    m = attention_maps.load(args.maps)
    name = args.name or os.path.basename(args.maps)
    L, H = m["layers"], m["heads"]
    worst_sum = worst_upper = worst_softmax = 0.0
    for s in m["seqs"]:
        P, S = s["probs"].astype(np.float64), s["scores"].astype(np.float64)
        T = P.shape[-1]
        mask = np.tril(np.ones((T, T), dtype=bool))
        worst_sum = max(worst_sum, float(np.abs(P.sum(axis=-1) - 1).max()))
        worst_upper = max(worst_upper, float(np.abs(P[..., ~mask]).max()) if T > 1 else 0.0)
        z = np.where(mask, S, -np.inf)
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        soft = e / e.sum(axis=-1, keepdims=True)
        worst_softmax = max(worst_softmax, float(np.linalg.norm(soft - P) / np.linalg.norm(soft)))
    report(worst_sum <= args.tol and worst_upper == 0.0 and worst_softmax <= args.tol,
           f"{name}: probability rows sum to 1 (worst |sum - 1| {worst_sum:.1e}), 0 above the diagonal (worst "
           f"{worst_upper:.1e}), the causal softmax of the scores (||softmax - probs|| / ||softmax|| {worst_softmax:.1e}, "
           f"tolerance {args.tol:.0e})")
    kinds = [s["kind"] for s in m["seqs"]]
    probe = next((s for s in m["seqs"] if s["kind"] == "induction"), None)
    if probe is not None:
        R, tok = probe["repeat"], probe["tokens"]
        ok = len(tok) == 2 * R + 1 and np.array_equal(tok[1:R + 1], tok[R + 1:])
        report(ok and kinds[0] == "prompt", f"{name}: sequences {kinds}; the induction probe is [eot, r_1..r_{R}, "
               f"r_1..r_{R}] ({len(tok)} tokens)")
    if args.tokens is not None:
        want = [int(x) for x in args.tokens.split(",")]
        got = [int(x) for x in m["seqs"][0]["tokens"]]
        report(got == want, f"{name}: the prompt's tokens {got[:12]}{' ...' if len(got) > 12 else ''} (expected "
               f"{want[:12]}{' ...' if len(want) > 12 else ''})")
    # the CSV against numpy's diagnostics of the same maps
    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    prompt = next(s for s in m["seqs"] if s["kind"] == "prompt")
    worst, where = 0.0, ""
    for r in rows:
        l, h = int(r["layer"]), int(r["head"])
        want = diagnostics(prompt["probs"][l, h], prompt["scores"][l, h], "prompt", 0)
        if probe is not None:
            want.update(diagnostics(probe["probs"][l, h], None, "induction", probe["repeat"]))
        for key, v in want.items():
            err = abs(float(r[key]) - v) / max(1.0, abs(v))
            if err > worst:
                worst, where = err, f" at layer {l} head {h} {key}: {r[key]} vs {v:.6g}"
    report(len(rows) == L * H and worst <= 1e-5, f"{name}: the CSV's {len(rows)} rows (expected {L * H}) equal numpy's "
           f"diagnostics of the maps (worst relative difference {worst:.1e}{where}, tolerance 1e-05)")
    # symmetry of the scores, bit for bit (--symmetric_tol: within that relative asymmetry)
    asym = [(l, h) for s in m["seqs"] for l in range(L) for h in range(H)
            if not np.array_equal(s["scores"][l, h], s["scores"][l, h].T)]
    n = len(m["seqs"]) * L * H
    worst = max((float(np.linalg.norm(x - x.T) / max(np.linalg.norm(x), 1e-30)) for s in m["seqs"]
                 for x in s["scores"].reshape(-1, *s["scores"].shape[2:]).astype(np.float64)), default=0.0)
    if args.symmetric and args.symmetric_tol > 0:
        report(worst <= args.symmetric_tol, f"{name}: Q = K: every score map equals its transpose within "
               f"||S - S^T|| / ||S|| {worst:.1e} (tolerance {args.symmetric_tol:.0e}); {n - len(asym)} of {n} bit for bit")
    elif args.symmetric:
        report(not asym, f"{name}: Q = K: every score map equals its transpose bit for bit ({n - len(asym)} of {n})")
    else:
        report(len(asym) > 0, f"{name}: q != k: {len(asym)} of {n} score maps are not symmetric (the symmetry check "
               "can fail)")


def compare(args):
    a, b = attention_maps.load(args.a), attention_maps.load(args.b)
    name = args.name or f"{os.path.basename(args.a)} vs {os.path.basename(args.b)}"
    keys = ["layers", "heads", "kv_heads", "head_dim", "scheme", "scale"]
    same = all(a[k] == b[k] for k in keys) and len(a["seqs"]) == len(b["seqs"])
    report(same, f"{name}: the same header ({', '.join(f'{k} {a[k]}' for k in keys)}; {len(a['seqs'])} sequences)")
    if not same:
        return
    for sa, sb in zip(a["seqs"], b["seqs"]):
        tokens = np.array_equal(sa["tokens"], sb["tokens"])
        errs = {k: float(np.linalg.norm(sa[k].astype(np.float64) - sb[k]) / max(np.linalg.norm(sb[k].astype(np.float64)),
                                                                                  1e-30)) for k in ("probs", "scores")}
        report(tokens and max(errs.values()) <= args.tol,
               f"{name} {sa['kind']} ({len(sa['tokens'])} tokens{'' if tokens else ', TOKENS DIFFER'}): ||a - b|| / ||b|| "
               f"probs {errs['probs']:.1e}, scores {errs['scores']:.1e} (tolerance {args.tol:.0e})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify")
    v.add_argument("maps")
    v.add_argument("csv")
    v.add_argument("--symmetric", action="store_true")
    v.add_argument("--symmetric_tol", type=float, default=0.0)
    v.add_argument("--tokens")
    v.add_argument("--tol", type=float, default=1e-5)
    v.add_argument("--name")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--tol", type=float, required=True)
    c.add_argument("--name")
    args = ap.parse_args()
    verify(args) if args.cmd == "verify" else compare(args)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
