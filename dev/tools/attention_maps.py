"""
attention_maps.py: pictures of what attention does, from the trainers' inspection run
(README, "Looking inside attention"; the walk-through is dev/ATTENTION_MAPS.md).

  build/train_gpt2_cpu_<scheme> -e MODEL --dump_attention maps.bin --attention_csv heads.csv [--prompt TEXT]

writes maps.bin (dev/FORMATS.md, "Attention maps") and heads.csv (a row per head); then

  /usr/bin/python3 dev/tools/attention_maps.py grid maps.bin -o grid.png [--seq prompt|induction] [--scores]
      a layer x head grid of heatmaps: each head's causal attention probabilities (query position
      down, key position across), or with --scores its pre-mask scores scale * q.k (every t and s,
      a diverging colour map centred on 0: the Q = K schemes' are symmetric); the tokens on the axes
      when the sequence has at most 40 of them
  /usr/bin/python3 dev/tools/attention_maps.py compare A.bin B.bin ... -o cmp.png [--names a b ...] [--layers 0 3]
      the same grid for several checkpoints (schemes), one block of rows each, one above the other
      (grid and compare: --layers and --heads pick some, --seq and --scores as above)
  /usr/bin/python3 dev/tools/attention_maps.py diagnostics A.csv B.csv ... -o diag.png [--names a b ...]
      each diagnostic as a layer x head heatmap per scheme, one row per diagnostic, one colour scale
      per row so that the schemes compare
  /usr/bin/python3 dev/tools/attention_maps.py info maps.bin
      the header and each sequence's shape and tokens

The diagnostics themselves are computed once, by the trainer (dev/trainer/attention_maps.h defines them);
this script only draws them. load() is the file's reader for other scripts. Needs numpy and
matplotlib (Debian: python3-numpy, python3-matplotlib); the trainers do not.
"""
import argparse
import csv
import os
import sys

import numpy as np

MAGIC = 20261127
VERSION = 1
SEQ_FIELD = 32  # header index of sequence 0's (T, kind, repeat)
KINDS = {0: "prompt", 1: "induction"}
TOKENIZER = "dev/data/gpt2/gpt2_tokenizer.bin"
LABEL_MAX_T = 40  # longer sequences get position numbers instead of tokens on the axes
DIAGNOSTICS = [  # (CSV column, title): the order of the rows of the diagnostics figure
    ("induction", "induction score"),
    ("prev_token", "previous-token score"),
    ("sink", "sink (first-token) fraction"),
    ("entropy", "entropy (nats)"),
    ("distance", "mean distance (positions)"),
    ("asymmetry", "score asymmetry"),
]


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def load(path):
    """The maps file as a dict: layers, heads, kv_heads, head_dim, scheme, compute_bytes, scale, and
    seqs, a list of dicts with kind ('prompt' or 'induction'), repeat, tokens (T,) int32, probs and
    scores (L, H, T, T) float32. Exits with a one-line error naming the file on a bad file."""
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        die(f"{path}: cannot read ({e.strerror})")
    if len(raw) < 1024:
        die(f"{path}: not an attention maps file: {len(raw)} bytes, shorter than its 1024-byte header (HINT: write one "
            "with the trainer's --dump_attention)")
    header = np.frombuffer(raw[:1024], dtype="<i4")
    if header[0] != MAGIC or header[1] != VERSION:
        die(f"{path}: not an attention maps file of version {VERSION} (magic {header[0]}, expected {MAGIC}; "
            "HINT: write one with the trainer's --dump_attention)")
    L, H = int(header[2]), int(header[3])
    n = int(header[9])
    fields = [int(header[i]) for i in (4, 5, 6, 7, 10)]
    if not (0 < L <= 1 << 24 and 0 < H <= 1 << 24 and 0 <= n <= 64 and all(0 <= f <= 1 << 24 for f in fields)):
        die(f"{path}: a header field is out of range (layers {L}, heads {H}, sequences {n}, fields 4-7 and 10 "
            f"{fields})")
    m = {"layers": L, "heads": H, "kv_heads": int(header[4]), "head_dim": int(header[5]), "scheme": int(header[6]),
         "compute_bytes": int(header[7]), "scale": float(header[8:9].view("<f4")[0]), "vocab_size": int(header[10]),
         "seqs": []}
    Ts = [int(header[SEQ_FIELD + 3 * i]) for i in range(n)]
    expected = 1024 + sum(4 * T + 8 * L * H * T * T for T in Ts)
    if any(T < 1 for T in Ts) or expected != len(raw):
        die(f"{path}: {len(raw)} bytes, its header says {expected}")
    offset = 1024
    for i, T in enumerate(Ts):
        tokens = np.frombuffer(raw, dtype="<i4", count=T, offset=offset)
        offset += 4 * T
        size = L * H * T * T
        probs = np.frombuffer(raw, dtype="<f4", count=size, offset=offset).reshape(L, H, T, T)
        offset += 4 * size
        scores = np.frombuffer(raw, dtype="<f4", count=size, offset=offset).reshape(L, H, T, T)
        offset += 4 * size
        kind = int(header[SEQ_FIELD + 3 * i + 1])
        m["seqs"].append({"kind": KINDS.get(kind, str(kind)), "repeat": int(header[SEQ_FIELD + 3 * i + 2]),
                          "tokens": tokens, "probs": probs, "scores": scores})
    return m


def sequence(m, path, kind):
    for s in m["seqs"]:
        if s["kind"] == kind:
            return s
    die(f"{path}: no {kind} sequence (it has: {', '.join(s['kind'] for s in m['seqs']) or 'none'})")


def token_strings(tokens, vocab_size):
    """Each token as short text, from the trainers' tokenizer file, for a model of GPT-2's vocabulary;
    the ids for another vocabulary (the tests' toys) or where the file is missing."""
    if vocab_size != 50257:
        return [str(int(t)) for t in tokens]
    try:
        raw = open(TOKENIZER, "rb").read()
        header = np.frombuffer(raw[:1024], dtype="<u4")
        vocab, pos, table = int(header[2]), 1024, []
        for _ in range(vocab):
            n = raw[pos]
            table.append(raw[pos + 1:pos + 1 + n].decode("utf-8", errors="replace"))
            pos += 1 + n
    except (OSError, IndexError):
        return [str(int(t)) for t in tokens]
    out = []
    for t in tokens:
        text = table[t] if 0 <= t < len(table) else str(int(t))
        text = text.replace("\n", "\\n")
        out.append("<eot>" if text == "<|endoftext|>" else (text if text.strip() else repr(text)[1:-1] or "_"))
    return out


def draw_head(ax, mat, scores, labels, first_col, last_row, title):
    """One head's (T, T) map into ax: probabilities on a square-root scale (the small weights stay
    visible), or scores on a colour map centred on 0."""
    from matplotlib.colors import PowerNorm
    T = mat.shape[0]
    if scores:
        lim = float(np.abs(mat).max()) or 1.0
        im = ax.imshow(mat, cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
    else:
        im = ax.imshow(mat, cmap="viridis", norm=PowerNorm(0.5, vmin=0.0, vmax=max(float(mat.max()), 1e-6)),
                       interpolation="nearest")
    ax.set_title(title, fontsize=8)
    if labels is not None and T <= LABEL_MAX_T:
        ax.set_xticks(range(T))
        ax.set_yticks(range(T))
        ax.set_xticklabels(labels if last_row else [], rotation=90, fontsize=5)
        ax.set_yticklabels(labels if first_col else [], fontsize=5)
    else:
        ax.tick_params(labelsize=5, labelleft=first_col, labelbottom=last_row)
    return im


def grid_figure(maps, names, kind, scores, layers, heads, out):
    """one row per (file, layer), one column per head: each file's block of rows under the last"""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    loaded = [(load(p), p) for p in maps]
    seqs = [sequence(m, p, kind) for m, p in loaded]
    for (m, p) in loaded:
        for flag, picked, n, what in (("--layers", layers, m["layers"], "layers"), ("--heads", heads, m["heads"], "heads")):
            if picked is not None and any(not 0 <= x < n for x in picked):
                die(f"{flag} {' '.join(map(str, picked))}: {p} has {what} 0..{n - 1}")
    rows = [(m, s, name, l) for (m, _), s, name in zip(loaded, seqs, names)
            for l in (range(m["layers"]) if layers is None else layers)]
    cols = max(m["heads"] if heads is None else len(heads) for m, _ in loaded)
    T = max(s["probs"].shape[2] for s in seqs)
    cell = 2.2 if T <= LABEL_MAX_T else 1.8
    fig, axes = plt.subplots(len(rows), cols, figsize=(cell * cols + 1.0, cell * len(rows) + 1.0), squeeze=False)
    for i, (m, s, name, l) in enumerate(rows):
        labels = token_strings(s["tokens"], m["vocab_size"])
        picked = list(range(m["heads"])) if heads is None else heads
        for j in range(cols):
            if j >= len(picked):
                axes[i][j].axis("off")
                continue
            h = picked[j]
            mat = (s["scores"] if scores else s["probs"])[l, h]
            title = f"{name + ' ' if len(loaded) > 1 else ''}L{l} H{h}"
            draw_head(axes[i][j], mat, scores, labels, j == 0, i == len(rows) - 1 or rows[i + 1][0] is not m, title)
    what = "pre-mask scores scale * q.k" if scores else "attention probabilities (square-root colour scale)"
    seq = seqs[0]
    about = f"{kind}, {seq['probs'].shape[2]} tokens" + (f", repeat {seq['repeat']}" if kind == "induction" else "")
    fig.suptitle(f"{what}\nquery position down, key position across ({about})", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / (cell * len(rows) + 1.0)))
    save(fig, out)


def read_csv(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        die(f"{path}: cannot read ({e.strerror})")
    want = ["layer", "head"] + [c for c, _ in DIAGNOSTICS]
    if not rows or any(c not in rows[0] for c in want):
        die(f"{path}: expected the trainer's --attention_csv file, a header {','.join(want)} and a row per head")
    try:
        L = max(int(r["layer"]) for r in rows) + 1
        H = max(int(r["head"]) for r in rows) + 1
    except (TypeError, ValueError):
        die(f"{path}: a layer or head column holds something other than a whole number")
    if min(int(r["layer"]) for r in rows) < 0 or min(int(r["head"]) for r in rows) < 0 or L * H > 1 << 20:
        die(f"{path}: layer and head must be whole numbers from 0, at most 2^20 heads in all")
    out = {c: np.full((L, H), np.nan) for c, _ in DIAGNOSTICS}
    for k, r in enumerate(rows):
        try:
            for c, _ in DIAGNOSTICS:
                out[c][int(r["layer"]), int(r["head"])] = float(r[c])
        except (TypeError, ValueError, IndexError):
            die(f"{path}: row {k + 2} is not a layer, a head and numbers: {','.join(str(v) for v in r.values())}")
    return out


def diagnostics_figure(csvs, names, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tables = [read_csv(p) for p in csvs]
    fig, axes = plt.subplots(len(DIAGNOSTICS), len(tables), figsize=(2.6 * len(tables) + 1.2, 2.1 * len(DIAGNOSTICS)),
                             squeeze=False, constrained_layout=True)
    for i, (col, title) in enumerate(DIAGNOSTICS):
        vmax = max(float(np.nanmax(t[col])) for t in tables) or 1.0
        vmin = min(0.0, min(float(np.nanmin(t[col])) for t in tables))
        for j, (t, name) in enumerate(zip(tables, names)):
            ax = axes[i][j]
            mat = t[col]
            im = ax.imshow(mat, cmap="magma", vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
            if mat.size <= 64:
                for (l, h), v in np.ndenumerate(mat):
                    ax.text(h, l, f"{v:.2g}", ha="center", va="center", fontsize=6,
                            color="black" if v > vmin + 0.6 * (vmax - vmin) else "white")
            ax.set_title(f"{name}\n{title}" if i == 0 else title, fontsize=8)
            if i == len(DIAGNOSTICS) - 1:
                ax.set_xlabel("head", fontsize=7)
            if j == 0:
                ax.set_ylabel("layer", fontsize=7)
            ax.set_xticks(range(mat.shape[1]))
            ax.set_yticks(range(mat.shape[0]))
            ax.tick_params(labelsize=6)
        fig.colorbar(im, ax=list(axes[i]), fraction=0.05, pad=0.02)
    fig.suptitle("head diagnostics (dev/trainer/attention_maps.h): one colour scale per row", fontsize=10)
    save(fig, out)


def save(fig, out):
    import matplotlib.pyplot as plt
    tmp = os.path.join(os.path.dirname(out) or ".", f".{os.path.basename(out)}.tmp{os.getpid()}.png")
    try:
        fig.savefig(tmp, dpi=100)
        os.replace(tmp, out)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        die(f"-o {out}: cannot write ({e.strerror})")
    plt.close(fig)
    print(f"wrote {out}")


def info(path):
    m = load(path)
    print(f"{path}: {m['layers']} layers x {m['heads']} heads ({m['kv_heads']} kv heads) of {m['head_dim']}, scheme id "
          f"{m['scheme']}, scale {m['scale']:g}, computed in {'fp32' if m['compute_bytes'] == 4 else 'bf16'}")
    for s in m["seqs"]:
        extra = f", repeat {s['repeat']}" if s["kind"] == "induction" else ""
        print(f"  {s['kind']}: {len(s['tokens'])} tokens{extra}: {' '.join(map(str, s['tokens'][:16]))}"
              f"{' ...' if len(s['tokens']) > 16 else ''}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("grid", "compare"):
        g = sub.add_parser(name)
        g.add_argument("maps", nargs="+" if name == "compare" else 1, help="maps files (--dump_attention)")
        g.add_argument("-o", "--out", required=True, help="the PNG to write")
        g.add_argument("--seq", choices=sorted(KINDS.values()), default="prompt", help="which sequence (default prompt)")
        g.add_argument("--scores", action="store_true", help="the pre-mask scores instead of the probabilities")
        g.add_argument("--layers", type=int, nargs="+", help="only these layers (default all)")
        g.add_argument("--heads", type=int, nargs="+", help="only these heads (default all)")
        g.add_argument("--names", nargs="+", help="a name per file (default the file names)")
    d = sub.add_parser("diagnostics")
    d.add_argument("csvs", nargs="+", help="diagnostics files (--attention_csv)")
    d.add_argument("-o", "--out", required=True, help="the PNG to write")
    d.add_argument("--names", nargs="+", help="a name per file (default the file names)")
    i = sub.add_parser("info")
    i.add_argument("maps")
    args = ap.parse_args()
    if args.cmd == "info":
        info(args.maps)
        return
    inputs = args.maps if args.cmd != "diagnostics" else args.csvs
    names = args.names or [os.path.splitext(os.path.basename(p))[0] for p in inputs]
    if len(names) != len(inputs):
        die(f"--names: {len(names)} names for {len(inputs)} files")
    out_dir = os.path.dirname(args.out) or "."
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK):
        die(f"-o {args.out}: {out_dir} is not a folder this script may write into")
    if any(os.path.exists(p) and os.path.exists(args.out) and os.path.samefile(p, args.out) for p in inputs):
        die(f"-o {args.out} is one of the inputs: writing it would destroy it")
    if args.cmd == "diagnostics":
        diagnostics_figure(args.csvs, names, args.out)
    else:
        grid_figure(args.maps, names, args.seq, args.scores, args.layers, args.heads, args.out)


if __name__ == "__main__":
    main()
