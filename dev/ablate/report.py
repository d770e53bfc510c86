"""
report.py: the results of one `make ablate` folder, from the trainers' own logs.

  /usr/bin/python3 dev/ablate/report.py OUT     (dev/ablate/ablate.sh runs it after the runs)

Reads OUT/plan.tsv (written by ablate.sh: a row per run and seed, their folders, steps and commands)
and, per run and seed, <folder>/main.log (step, val and summary lines), <folder>/stdout.log (the
`model:` and `batch:` lines) and <folder>/DONE (the other processes' load during the run, where it
trained, and on a GPU whether another process used that GPU meanwhile). A resumed
run appends to main.log, so a step can appear twice: the last occurrence wins. Writes four files into
OUT:

  runs.csv   long format, one row per logged loss, columns:
               run      the run's name in the config
               scheme   its Q/K/V scheme
               seed     the trainer's --seed of that training
               kind     train (the step's mean training loss) or val (validation loss)
               step     train: the step (1-based) the loss belongs to; val: steps done when measured
               tokens   training tokens seen at that point: step x tokens per step
               loss     mean cross-entropy, nats per token
               tok_s    train: that step's tokens/s; val: empty
  summary.csv  a row per run: run, scheme, seeds, n, final_val_loss_mean, final_val_loss_sd (n - 1),
             diff_vs_baseline (of the means), diff_se, welch_t, welch_df, p_value (two-sided),
             tok_s_mean, other_load_max, induction_mean, entropy_mean, sink_mean (the head diagnostics
             below); empty where not applicable (the baseline, one seed, no heads.csv)
  loss.png   1200 x 800 pixels (12 x 8 inches at 100 dpi): per run one colour, the training loss
             smoothed by a centered moving average (the mean of the w steps around each step, w odd,
             about 4% of the steps; no lag, so it lines up with the validation markers; the window
             shrinks symmetrically at both ends) as a line, and the validation losses as markers;
             with several seeds the line and markers are the means over the seeds, with a band
             and error bars of ± 1 standard deviation; log-scale y. Left: the whole run; right: the
             second half of the tokens, zoomed in.
  table.md   per run: scheme, shape, parameters (total and non-embedding) and KV-cache bytes per
             token from build/params (attention_variants.cuh), tokens/s (with the other load it was
             measured under, or n/a above LOAD_SHARED or when its GPU was shared) and peak memory from the trainer's summary
             line, the seeds, the final validation loss (mean ± sd), the validation loss and
             perplexity relative to the baseline run (the first `standard` run unless the config
             names one), the difference ± its standard error and Welch's t-test; then the final
             loss of every seed.

Each output is compared with every input (plan.tsv, each run's main.log and stdout.log) by identity
(device and inode, so that a symlink is caught) and refused before the inputs are read; a folder where
an output goes is refused too. Each is written under a temporary name (.<name>.tmp<pid>) and renamed:
no half-written file, and a symlink at an output's name is replaced, never written through.

Needs numpy and matplotlib (Debian: python3-numpy, python3-matplotlib); the trainers do not.
"""
import csv
import math
import os
import re
import subprocess
import sys

LOAD_SHARED = 0.10  # other processes' share of the CPU above which tokens/s is left out (dev/ablate/ablate.py)
ALPHA = 0.05  # the significance level of table.md's verdicts
PNG_SIZE_INCHES = (12, 8)
PNG_DPI = 100  # 1200 x 800 pixels; dev/test/test_ablate.sh checks the size
SMOOTH_FRACTION = 0.04  # the moving average spans about this fraction of the steps

STEP_RE = re.compile(r"^step (\d+)/(\d+) \| loss (\S+) \|.*\| ([0-9.]+) tok/s")
VAL_RE = re.compile(r"^step (\d+) \| val loss (\S+)")
SUMMARY_RE = re.compile(r"^summary: .*\| ([0-9.]+) tok/s \|.*peak memory ([0-9.]+) MiB")
MODEL_RE = re.compile(r"^model: scheme (\S+) \| n_layer=(\d+) n_embd=(\d+) n_head=(\d+) n_kv_head=(\d+) "
                      r"mlp=(\d+) bias=(\d+) tied=(\d+) (?:T|context)=(\d+) .*\| (\d+) parameters \|")
BATCH_RE = re.compile(r"^batch: .*\| (\d+) tokens per step \|")


def die(msg):
    print("report: " + msg, file=sys.stderr)
    sys.exit(1)


OUTPUTS = ("runs.csv", "summary.csv", "loss.png", "table.md")


def identity(path):
    try:
        st = os.stat(path)
        return st.st_dev, st.st_ino
    except OSError:
        return None


def check_outputs(out, inputs):
    """each output: not a folder (or anything but a file), and not one of the inputs"""
    ids = {}
    for p in inputs:
        i = identity(p)
        if i:
            ids.setdefault(i, p)
    for name in OUTPUTS:
        p = os.path.join(out, name)
        if os.path.lexists(p) and os.path.exists(p) and not os.path.isfile(p):
            die("%s exists and is not a file (a folder?), where the report writes %s (HINT: move it)" % (p, name))
        i = identity(p)
        if i in ids:
            die("%s is %s, an input of the report: writing it would destroy it (HINT: remove the link %s)"
                % (p, ids[i], p))


def replace_file(path, write):
    """write(tmp) into a temporary name beside path, then rename it to path"""
    tmp = os.path.join(os.path.dirname(path), ".%s.tmp%d" % (os.path.basename(path), os.getpid()))
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


def read_plan(out):
    """plan.tsv's meta lines and rows: one per run and seed (name, scheme, seed, folder, steps,
    tokens_per_step, command); a plan.tsv from before seeds (no seed and folder columns) reads as one
    seed, its folders OUT/<run>"""
    path = os.path.join(out, "plan.tsv")
    if not os.path.isfile(path):
        die("%s: no such file (HINT: make ablate CONFIG=... writes it; pass the folder make ablate wrote)" % path)
    meta, units, cols = {}, [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# "):
                k, _, v = line[2:].partition("\t")
                meta[k] = v
            elif line.startswith("name\t"):
                cols = line.split("\t")
            elif line:
                cells = line.split("\t", len(cols) - 1)
                u = dict(zip(cols, cells))
                u.setdefault("seed", meta.get("seed", "?"))
                u.setdefault("folder", u["name"])
                units.append(dict(name=u["name"], scheme=u["scheme"], seed=u["seed"], folder=u["folder"],
                                  steps=int(u["steps"]), tps=int(u["tokens_per_step"]), command=u["command"]))
    meta.setdefault("seeds", meta.get("seed", "?"))
    return meta, units


def read_run(out, run, device):
    """Fills a run at one seed with its losses, summary, load, shape and parameter counts from its folder
    (device: plan.tsv's trainer, for a DONE from before DONE said where the run trained)."""
    d = os.path.join(out, run["folder"])
    run["done"] = os.path.isfile(os.path.join(d, "DONE"))
    run["load"] = None  # the other processes' share of the CPU during the run (ablate.py writes it into DONE)
    run["on_gpu"] = device == "gpu"
    run["gpu_shared"] = None  # True/False: nvidia-smi listed another process on its GPU or not; None: not known
    if run["done"]:
        with open(os.path.join(d, "DONE"), errors="replace") as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition(" ")
                if k == "other_load":
                    try:
                        run["load"] = float(v)
                    except ValueError:
                        pass
                elif k == "device":
                    run["on_gpu"] = v.startswith("gpu ") or v.startswith("the GPU")
                elif k == "gpu_shared" and v in ("0", "1"):
                    run["gpu_shared"] = v == "1"
    train, val, summary = {}, {}, None
    log = os.path.join(d, "main.log")
    if os.path.isfile(log):
        with open(log) as f:
            for line in f:
                m = STEP_RE.match(line)
                if m:
                    train[int(m.group(1))] = (float(m.group(3)), float(m.group(4)))
                    continue
                m = VAL_RE.match(line)
                if m:
                    val[int(m.group(1))] = float(m.group(2))
                    continue
                m = SUMMARY_RE.match(line)
                if m:
                    summary = (float(m.group(1)), float(m.group(2)))
    run["train"] = sorted(train.items())  # [(step, (loss, tok_s))]
    run["val"] = sorted(val.items())      # [(step, loss)]
    run["summary"] = summary
    run["shape"] = None
    stdout = os.path.join(d, "stdout.log")
    if os.path.isfile(stdout):
        with open(stdout, errors="replace") as f:
            for line in f:
                m = MODEL_RE.match(line)
                if m:  # the last one: a resume prints it again
                    run["shape"] = dict(zip(("scheme", "L", "C", "H", "Hkv", "M", "bias", "tied", "T", "n"), m.groups()))
                m = BATCH_RE.match(line)
                if m and int(m.group(1)) != run["tps"]:
                    die("%s: the trainer ran %s tokens per step, plan.tsv says %d" % (stdout, m.group(1), run["tps"]))
    run["params"] = params_of(run["shape"]) if run["shape"] else None
    run["heads"] = read_heads(os.path.join(d, HEADS_CSV))
    if run["params"] and run["params"][0] != int(run["shape"]["n"]):  # two computations of one number
        print("report: warning: run %s: the trainer counts %s parameters, build/params %d" %
              (run["folder"], run["shape"]["n"], run["params"][0]), file=sys.stderr)


HEADS_CSV = "heads.csv"  # a finished run's head diagnostics, written by ablate.py's head_diagnostics
HEAD_COLUMNS = ("induction", "entropy", "sink")  # its columns that table.md and summary.csv average


def read_heads(path):
    """the mean over heads of HEAD_COLUMNS in a run's heads.csv (ablate.py's head_diagnostics), or None
    where there is none"""
    if not os.path.isfile(path):
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    try:
        return tuple(sum(float(r[c]) for r in rows) / len(rows) for c in HEAD_COLUMNS) if rows else None
    except (KeyError, ValueError):
        die("%s: expected the trainer's --attention_csv columns %s with numbers" % (path, ", ".join(HEAD_COLUMNS)))


def group(units):
    """the runs in config order, each with its seeds' units (plan.tsv lists them seed by seed)"""
    runs, by_name = [], {}
    for u in units:
        if u["name"] not in by_name:
            by_name[u["name"]] = dict(name=u["name"], scheme=u["scheme"], steps=u["steps"], tps=u["tps"], seeds=[])
            runs.append(by_name[u["name"]])
        by_name[u["name"]]["seeds"].append(u)
    for r in runs:
        s = r["seeds"]
        r["done"] = all(u["done"] for u in s)
        # the final validation loss of each finished seed: a seed stopped part-way (a time limit, Ctrl-C) has
        # validation losses too, of fewer tokens, and is no sample of the same quantity
        r["finals"] = [u["val"][-1][1] for u in s if u["val"] and u["done"]]
        r["shape"] = next((u["shape"] for u in s if u["shape"]), None)
        r["params"] = next((u["params"] for u in s if u["params"]), None)
        heads = [u["heads"] for u in s]  # the mean over the seeds, where every seed has its diagnostics
        r["heads"] = None if not heads or None in heads else tuple(sum(h[i] for h in heads) / len(heads)
                                                                   for i in range(len(HEAD_COLUMNS)))
    return runs


# ---------------------------------------------------------------------------------------------
# statistics: mean and standard deviation over the seeds, Welch's t-test against the baseline. The
# Student t distribution's tail comes from the regularized incomplete beta function, evaluated with
# its continued fraction (no scipy here); dev/test/test_ablate.sh checks it against textbook
# critical values and a numerical integration of the t density.

def mean_sd(xs):
    """(mean, sample standard deviation with n - 1, or None for one value)"""
    n = len(xs)
    m = sum(xs) / n
    return m, (math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1)) if n > 1 else None)


def beta_fraction(a, b, x):
    """the continued fraction of I_x(a, b): 1 / (1 + d1 / (1 + d2 / (1 + ...))), with
    d(2m+1) = -(a+m)(a+b+m)x / ((a+2m)(a+2m+1)) and d(2m) = m(b-m)x / ((a+2m-1)(a+2m)), evaluated
    front to back by the modified Lentz method (tiny stands in for a zero denominator)"""
    tiny, eps = 1e-300, 1e-15
    f, c, d = 1.0, 1.0, 0.0
    for j in range(1, 2000):
        m = j // 2
        if j % 2:
            dj = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        else:
            dj = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        d = 1.0 + dj * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + dj / c
        c = c if abs(c) > tiny else tiny
        f *= c * d
        if abs(c * d - 1.0) < eps:
            break
    return 1.0 / f


def incomplete_beta(a, b, x):
    """the regularized incomplete beta function I_x(a, b) = x^a (1-x)^b / (a B(a, b)) x the fraction,
    which converges fast for x < (a+1)/(a+b+2); above that, I_x(a, b) = 1 - I_(1-x)(b, a)"""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - incomplete_beta(b, a, 1.0 - x)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    return math.exp(log_front) / a * beta_fraction(a, b, x)


def t_two_sided_p(t, df):
    """P(|T| >= |t|) for Student's t with df degrees of freedom (df > 0, any real): I_(df/(df+t^2))(df/2, 1/2)"""
    if math.isinf(t):
        return 0.0
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def welch(xs, base):
    """Welch's t-test of mean(xs) against mean(base): (difference of the means, its standard error,
    t, Welch-Satterthwaite df, two-sided p), or None when a group has fewer than 2 values or both
    have no spread (then there is no standard error to test with)"""
    if len(xs) < 2 or len(base) < 2:
        return None
    (m1, s1), (m2, s2) = mean_sd(xs), mean_sd(base)
    v1, v2 = s1 * s1 / len(xs), s2 * s2 / len(base)
    if v1 + v2 == 0.0:
        return None
    se = math.sqrt(v1 + v2)
    t = (m1 - m2) / se
    df = (v1 + v2) ** 2 / (v1 * v1 / (len(xs) - 1) + v2 * v2 / (len(base) - 1))
    return m1 - m2, se, t, df, t_two_sided_p(t, df)


def params_of(s):
    """total, non_embedding, kv_bytes_per_token of a shape, from build/params (the source of truth)."""
    args = ["./build/params", s["scheme"], s["L"], s["C"], s["H"], s["Hkv"], s["M"], s["bias"], s["T"]]
    try:
        r = subprocess.run(args, capture_output=True, text=True)
    except OSError as e:
        die("cannot run build/params (%s) (HINT: make build/params)" % e)
    if r.returncode != 0:
        die("%s failed: %s" % (" ".join(args), r.stderr.strip()))
    kv = dict(f.split("=", 1) for f in r.stdout.split() if "=" in f)
    return int(kv["total"]), int(kv["non_embedding"]), int(kv["kv_bytes_per_token"])


def write_csv(out, units):
    replace_file(os.path.join(out, "runs.csv"), lambda tmp: write_csv_to(tmp, units))


def write_csv_to(path, units):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "scheme", "seed", "kind", "step", "tokens", "loss", "tok_s"])
        for r in units:
            for step, (loss, tok_s) in r["train"]:
                w.writerow([r["name"], r["scheme"], r["seed"], "train", step, step * r["tps"], "%.6f" % loss,
                            "%.0f" % tok_s])
            for step, loss in r["val"]:
                w.writerow([r["name"], r["scheme"], r["seed"], "val", step, step * r["tps"], "%.6f" % loss, ""])


def statistics(runs, baseline):
    """per run: the mean and standard deviation of its seeds' final validation losses, and its
    difference from the baseline run with Welch's test (None where there is nothing to test)"""
    base = next((r for r in runs if r["name"] == baseline and r["finals"]), None)
    for r in runs:
        r["mean"], r["sd"] = mean_sd(r["finals"]) if r["finals"] else (None, None)
        r["vs"] = None if base is None or r is base or not r["finals"] else r["mean"] - base["mean"]
        r["welch"] = None if r["vs"] is None else welch(r["finals"], base["finals"])
        tok = [u["summary"][0] for u in r["seeds"] if u["summary"] and u["done"]]
        r["tok_s"] = sum(tok) / len(tok) if tok else None
        loads = [u["load"] for u in r["seeds"] if u["done"]]  # as the speed: the seeds that finished
        r["load"] = None if not loads or any(l is None for l in loads) else max(loads)
        gpu = [u for u in r["seeds"] if u["on_gpu"]]
        r["gpu_shared"] = True if any(u["gpu_shared"] for u in gpu) else None if \
            any(u["gpu_shared"] is None for u in gpu) or not gpu else False
        r["on_gpu"] = bool(gpu)
        r["peak"] = max((u["summary"][1] for u in r["seeds"] if u["summary"] and u["done"]), default=None)
    return base


def write_summary(out, runs):
    """summary.csv: a row per run, the numbers of table.md unrounded (empty where not applicable)"""
    def cell(v, fmt="%.6f"):
        return "" if v is None else fmt % v

    def write(tmp):
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["run", "scheme", "seeds", "n", "final_val_loss_mean", "final_val_loss_sd", "diff_vs_baseline",
                        "diff_se", "welch_t", "welch_df", "p_value", "tok_s_mean", "other_load_max", "gpu_shared"] +
                       ["%s_mean" % c for c in HEAD_COLUMNS])
            for r in runs:
                wt = r["welch"] or (None, None, None, None, None)
                w.writerow([r["name"], r["scheme"], " ".join(u["seed"] for u in r["seeds"]), len(r["finals"]),
                            cell(r["mean"]), cell(r["sd"]), cell(r["vs"]), cell(wt[1]), cell(wt[2]),
                            cell(wt[3]), cell(wt[4], "%.6g"), cell(r["tok_s"], "%.0f"), cell(r["load"], "%.4f"),
                            "" if r["gpu_shared"] is None else "%d" % r["gpu_shared"]] +
                           [cell(r["heads"][i] if r["heads"] else None) for i in range(len(HEAD_COLUMNS))])
    replace_file(os.path.join(out, "summary.csv"), write)


def smoothing_window(n_steps):
    """an odd number of steps, about SMOOTH_FRACTION of them (1 = no smoothing)"""
    return 2 * int(round(SMOOTH_FRACTION * n_steps / 2)) + 1


def centered_mean(values, w):
    """the mean of the w values centered on each one; near the ends the window shrinks to the
    values available on both sides, so the curve never lags"""
    n, half, out = len(values), w // 2, []
    for i in range(n):
        h = min(half, i, n - 1 - i)
        out.append(sum(values[i - h:i + h + 1]) / (2 * h + 1))
    return out


def tokens_unit(max_tokens):
    if max_tokens >= 1e9:
        return 1e9, "billions"
    if max_tokens >= 1e6:
        return 1e6, "millions"
    return 1e3, "thousands"


def nice_ticks(lo, hi, most=10):
    """round values between lo and hi, evenly spaced, the finest spacing giving at most `most`"""
    for step in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 20, 50):
        first, last = math.ceil(lo / step), math.floor(hi / step)
        if last - first + 1 <= most:
            return [round(k * step, 2) for k in range(first, last + 1)]
    return [lo, hi]


def seed_mean(curves):
    """the mean and standard deviation, step by step, of several seeds' curves [(step, value)] over the
    steps they all have (a resumed seed may lack some): (steps, means, sds; sds None for one seed)"""
    common = sorted(set.intersection(*[set(s for s, _ in c) for c in curves])) if curves else []
    values = [dict(c) for c in curves]
    means, sds = [], []
    for s in common:
        m, sd = mean_sd([v[s] for v in values])
        means.append(m)
        sds.append(sd)
    return common, means, (sds if len(curves) > 1 else None)


def write_png(out, runs, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    fig, axes = plt.subplots(1, 2, figsize=PNG_SIZE_INCHES, dpi=PNG_DPI)
    colors = plt.get_cmap("tab10" if len(runs) <= 10 else "tab20").colors
    max_tokens = max([r["steps"] * r["tps"] for r in runs] + [1])
    unit, unit_name = tokens_unit(max_tokens)
    n_seeds = max(len(r["seeds"]) for r in runs) if runs else 1
    # runs that coincide must all stay visible: each later run is drawn on top, thinner, smaller,
    # with its own dash pattern and marker shape
    def style(i):
        shrink = i / max(1, len(runs) - 1)
        return dict(color=colors[i % len(colors)], lw=3.0 - 1.8 * shrink, ls=("-", "--", "-.", ":")[i % 4],
                    marker="osD^vP*Xph"[i % 10], ms=9 - 4 * shrink)
    for ax, start, panel in ((axes[0], 0.0, "whole run"), (axes[1], 0.5, "second half, zoomed")):
        lo, hi = math.inf, 0.0
        for i, r in enumerate(runs):
            st = style(i)
            # each seed's train loss smoothed, then the mean over the seeds and a band of one standard
            # deviation around it; the validation losses: their mean, with the same spread as error bars
            smoothed = []
            for u in r["seeds"]:
                if u["train"]:
                    steps = [s for s, _ in u["train"]]
                    smoothed.append(list(zip(steps, centered_mean([l for _, (l, _) in u["train"]],
                                                                  smoothing_window(r["steps"])))))
            steps, mean, sd = seed_mean(smoothed)
            keep = [k for k, s in enumerate(steps) if s * r["tps"] >= start * max_tokens]
            if keep:
                xs = [steps[k] * r["tps"] / unit for k in keep]
                ys = [mean[k] for k in keep]
                ax.plot(xs, ys, color=st["color"], lw=st["lw"], ls=st["ls"], zorder=2 + i)
                if sd:
                    low, high = [mean[k] - sd[k] for k in keep], [mean[k] + sd[k] for k in keep]
                    ax.fill_between(xs, low, high, color=st["color"], alpha=0.2, lw=0, zorder=1)
                    lo, hi = min(lo, min(low)), max(hi, max(high))
                lo, hi = min(lo, min(ys)), max(hi, max(ys))
            steps, mean, sd = seed_mean([u["val"] for u in r["seeds"] if u["val"]])
            keep = [k for k, s in enumerate(steps) if s * r["tps"] >= start * max_tokens]
            if keep:
                xs, ys = [steps[k] * r["tps"] / unit for k in keep], [mean[k] for k in keep]
                err = [sd[k] for k in keep] if sd else None
                ax.errorbar(xs, ys, yerr=err, color=st["color"], ls="none", marker=st["marker"], ms=st["ms"],
                            mec="black", mew=0.5, ecolor="black", elinewidth=1, capsize=3, zorder=20 + i)
                lo = min(lo, min(y - (e if err else 0) for y, e in zip(ys, err or ys)))
                hi = max(hi, max(y + (e if err else 0) for y, e in zip(ys, err or ys)))
        ax.set_yscale("log")
        if hi > 0 and lo > 0:
            pad = (hi / lo) ** 0.04
            ax.set_ylim(lo / pad, hi * pad)
            ax.yaxis.set_major_locator(FixedLocator(nice_ticks(lo / pad, hi * pad)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
            ax.yaxis.set_minor_formatter(NullFormatter())
        span = (1 - start) * max_tokens / unit
        ax.set_xlim(start * max_tokens / unit - 0.02 * span, max_tokens / unit + 0.02 * span)
        ax.set_xlabel("training tokens seen (%s)" % unit_name)
        ax.set_ylabel("loss (nats per token, log scale)")
        ax.set_title(panel)
        ax.grid(True, which="major", alpha=0.3)
    handles = [Line2D([], [], color=style(i)["color"], lw=2.0, ls=style(i)["ls"], marker=style(i)["marker"], ms=6,
                      mec="black", mew=0.5,
                      label=r["name"] if r["name"] == r["scheme"] else "%s (%s)" % (r["name"], r["scheme"]))
               for i, r in enumerate(runs)]
    windows = sorted(set(smoothing_window(r["steps"]) for r in runs))
    over = ", mean over %d seeds" % n_seeds if n_seeds > 1 else ""
    handles += [Line2D([], [], color="gray", lw=2.0, label="line: train loss, centered mean of %s steps%s" %
                       ("/".join(str(w) for w in windows), over)),
                Line2D([], [], color="gray", ls="none", marker="o", mec="black", mew=0.5,
                       label="markers: validation loss%s" % over)]
    if n_seeds > 1:
        handles.append(Patch(color="gray", alpha=0.3, label="band, error bars: ±1 standard deviation over the seeds"))
    axes[0].legend(handles=handles, loc="upper right", fontsize=9, framealpha=0.9)
    fig.suptitle(title)
    fig.tight_layout()
    replace_file(os.path.join(out, "loss.png"), lambda tmp: fig.savefig(tmp, dpi=PNG_DPI, format="png"))
    plt.close(fig)


def fmt_int(n):
    return "{:,}".format(n)


def relative(loss, base):
    """(delta val loss %, delta perplexity %) of loss against base; perplexity = exp(loss)"""
    return 100.0 * (loss - base) / base, 100.0 * (math.exp(loss - base) - 1.0)


def speed_cell(r):
    """tokens/s with the load it was measured under; left out when others used the machine or its GPU"""
    if r["tok_s"] is None:
        return "?"
    if r["gpu_shared"]:
        return "n/a (GPU shared with another process)"
    gpu = "; GPU sharing not measured" if r["on_gpu"] and r["gpu_shared"] is None else ""
    if r["load"] is None:
        return "{:,.0f} (load not measured{})".format(r["tok_s"], gpu)
    if r["load"] > LOAD_SHARED:
        return "n/a (shared machine, %.0f%% other load)" % (100 * r["load"])
    return "{:,.0f} (other load {:.0f}%{})".format(r["tok_s"], 100 * r["load"], gpu)


def welch_cell(r, base):
    if r is base:
        return "baseline"
    if r["vs"] is None:
        return "n/a"
    if len(r["finals"]) < 2 or len(base["finals"]) < 2:
        return "n/a (1 seed)"
    if r["welch"] is None:
        return "n/a (no spread over the seeds)"
    d, se, t, df, p = r["welch"]
    verdict = ("worse" if d > 0 else "better") if p < ALPHA else "no detectable difference"
    return "p = %.2g (t = %.2f, df = %.1f, n = %d vs %d): %s" % (p, t, df, len(r["finals"]), len(base["finals"]),
                                                                 verdict)


def write_table(out, meta, runs):
    baseline = meta.get("baseline", "")
    base = statistics(runs, baseline)
    seeds = meta.get("seeds", "?").split()
    many = len(seeds) > 1 or (max(len(r["finals"]) for r in runs) > 1 if runs else False)
    b = baseline or "standard"
    lines = ["# make ablate CONFIG=%s" % meta.get("config", ""), "",
             "Every run: %s training tokens of `%s`, %s, on the %s trainer%s." %
             (fmt_int(int(meta.get("tokens", "0"))), meta.get("data", "?"),
              "seed %s" % seeds[0] if len(seeds) == 1 else "once per seed %s (the seed sets the initial weights and "
              "the data order together)" % ", ".join(seeds),
              {"gpu": "CUDA", "cpu": "CPU"}.get(meta.get("device"), "?"),
              "; " + meta["where"] if meta.get("where") else ""),
             "",
             "| run | scheme | shape | parameters | non-embedding | KV-cache bytes/token | tokens/s "
             "| peak memory (MiB) | seeds | final val loss%s | val loss vs %s | perplexity vs %s "
             "| difference vs %s%s | Welch's t-test vs %s | induction | entropy | sink |"
             % (" (mean ± sd)" if many else "", b, b, b, " (± SE)" if many else "", b),
             "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|"]
    for r in runs:
        s = r["shape"]
        shape = "L%s C%s H%s Hkv%s M%s bias%s" % (s["L"], s["C"], s["H"], s["Hkv"], s["M"], s["bias"]) if s else "?"
        total, nonemb, kvb = (fmt_int(x) for x in r["params"]) if r["params"] else ("?", "?", "?")
        peak = "{:,.0f}".format(r["peak"]) if r["peak"] is not None else "?"
        if r["mean"] is None:
            final = "not yet run" if not any(u["done"] for u in r["seeds"]) else "?"
        else:
            final = "%.4f" % r["mean"] + (" ± %.4f" % r["sd"] if r["sd"] is not None else "")
        if r is base:
            dloss = dppl = diff = "baseline"
        elif r["vs"] is None:
            dloss = dppl = diff = "n/a"
        else:
            a, c = relative(r["mean"], base["mean"])
            dloss, dppl = "%+.2f%%" % a, "%+.2f%%" % c
            diff = "%+.4f" % r["vs"] + (" ± %.4f" % r["welch"][1] if r["welch"] else "")
        n_done = sum(1 for u in r["seeds"] if u["done"])
        name = r["name"] + ("" if r["done"] else " (not yet run)" if not n_done else " (%d of %d seeds)"
                            % (n_done, len(r["seeds"])))
        heads = ["%.3f" % v for v in r["heads"]] if r["heads"] else ["?"] * len(HEAD_COLUMNS)
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |" % (
            name, r["scheme"], shape, total, nonemb, kvb, speed_cell(r), peak, len(r["finals"]), final, dloss, dppl,
            diff, welch_cell(r, base) if base else "n/a", " | ".join(heads)))
    lines.append("")
    if many:
        lines += ["Final validation loss per seed:", "",
                  "| run | %s |" % " | ".join("seed %s" % x for x in seeds), "|---|%s" % ("--:|" * len(seeds))]
        for r in runs:
            by_seed = {u["seed"]: u["val"][-1][1] for u in r["seeds"] if u["val"] and u["done"]}
            lines.append("| %s | %s |" % (r["name"], " | ".join("%.4f" % by_seed[x] if x in by_seed else "not yet run"
                                                                for x in seeds)))
        lines.append("")
    if base is None:
        lines.append("No baseline: the config has no run of scheme `standard` (and no `baseline = <run>`), so the "
                     "relative columns are n/a.")
    else:
        lines.append("Relative columns: 100·(L − L_base)/L_base for the final validation loss L (the mean over the "
                     "seeds), and 100·(exp(L − L_base) − 1) for the perplexity exp(L), against `%s`; positive = worse "
                     "(higher) than the baseline." % baseline)
        lines.append("Significance: Welch's two-sided t-test of each run's final validation losses (one per seed) "
                     "against the baseline's; the difference is that of the means ± its standard error "
                     "sqrt(sd²/n + sd_base²/n_base), df by Welch-Satterthwaite, n the seeds per group. It assumes "
                     "each group's losses are independent draws from a normal distribution (variances may differ); "
                     "the runs of a seed share its data order, a pairing the test ignores. p < %g reads as "
                     "worse/better, otherwise \"no detectable difference\", which is not evidence of equality: with "
                     "%d seeds a difference is only detected when it is several times the seeds' standard deviation. "
                     "The p-values are per comparison, not corrected for the number of runs compared. With one seed "
                     "there is no spread to test against (n/a)." % (ALPHA, max([2] + [len(r["finals"]) for r in runs])))
    lines.append("Shape: n_layer, n_embd, n_head, n_kv_head, MLP hidden size, biases. Parameters (tied head, vocab "
                 "padded to 50304) and bf16 KV-cache bytes per token (inference) from build/params. tokens/s: the mean "
                 "over the timed steps (the trainer's summary line), averaged over the seeds, with the other "
                 "processes' share of the CPU during the runs (the largest over the seeds: /proc/stat's busy time of "
                 "the machine, or of a pinned run's own cores, less this ablation's trainers' and the runner's own, "
                 "over wall time x cores); above %.0f%% the speed is left out (n/a: shared machine), and so it is "
                 "for a run whose GPU nvidia-smi listed another process on while it trained (n/a: GPU shared). "
                 "Peak memory: GPU memory in use (CUDA trainer) or maximum resident "
                 "set size (CPU trainer), the largest over the seeds." % (100 * LOAD_SHARED))
    lines.append("Head diagnostics (heads.csv, the trainer's --attention_csv on the final model; dev/trainer/attention_maps.h): "
                 "the mean over every layer and head, then over the seeds. induction: on the fixed probe of an "
                 "end-of-text token and up to 50 random tokens, repeated, the attention from each repeated token to the token "
                 "after its earlier occurrence; entropy: nats of each query's attention row on the fixed probe "
                 "sentence; sink: the attention on that sentence's first (end-of-text) token. ? = no heads.csv.")
    def write(tmp):
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
    replace_file(os.path.join(out, "table.md"), write)


def main():
    if len(sys.argv) != 2:
        die("usage: report.py OUT (the folder make ablate wrote)")
    out = os.path.abspath(sys.argv[1])
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # build/params is relative to the root
    check_outputs(out, [os.path.join(out, "plan.tsv")])
    meta, units = read_plan(out)
    check_outputs(out, [os.path.join(out, u["folder"], f) for u in units
                        for f in ("main.log", "stdout.log", "DONE", HEADS_CSV)])
    for u in units:
        read_run(out, u, meta.get("device"))
    runs = group(units)
    write_csv(out, units)
    write_table(out, meta, runs)  # computes the statistics summary.csv and the plot use
    write_summary(out, runs)
    config = os.path.basename(meta.get("config", "?"))
    seeds = len(meta.get("seeds", "").split())
    write_png(out, runs, "make ablate CONFIG=%s: train loss (smoothed) and validation loss, same data and tokens%s"
              % (meta.get("config", config), ", mean over %d seeds" % seeds if seeds > 1 else ", same seed"))
    print("report: wrote %s/runs.csv, %s/summary.csv, %s/loss.png, %s/table.md" % (out, out, out, out))


if __name__ == "__main__":
    main()
