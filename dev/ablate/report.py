"""
report.py: the results of one `make ablate` folder, from the trainers' own logs.

  /usr/bin/python3 dev/ablate/report.py OUT     (dev/ablate/ablate.sh runs it after the runs)

Reads OUT/plan.tsv (written by ablate.sh: the runs in config order, their steps and commands) and,
per run, OUT/<run>/main.log (step, val and summary lines) and OUT/<run>/stdout.log (the `model:`
and `batch:` lines). A resumed run appends to main.log, so a step can appear twice: the last
occurrence wins. Writes three files into OUT:

  runs.csv   long format, one row per logged loss, columns:
               run      the run's name in the config
               scheme   its Q/K/V scheme
               kind     train (the step's mean training loss) or val (validation loss)
               step     train: the step (1-based) the loss belongs to; val: steps done when measured
               tokens   training tokens seen at that point: step x tokens per step
               loss     mean cross-entropy, nats per token
               tok_s    train: that step's tokens/s; val: empty
  loss.png   1200 x 800 pixels (12 x 8 inches at 100 dpi): per run one colour, the training loss
             smoothed by a centered moving average (the mean of the w steps around each step, w odd,
             about 4% of the steps; no lag, so it lines up with the validation markers; the window
             shrinks symmetrically at both ends) as a line, and the validation losses as markers;
             log-scale y. Left: the whole run; right: the second half of the tokens, zoomed in.
  table.md   per run: scheme, shape, parameters (total and non-embedding) and KV-cache bytes per
             token from build/params (attention_variants.cuh), tokens/s and peak memory from the
             trainer's summary line, final validation loss, and the validation loss and perplexity
             relative to the baseline run (the first `standard` run unless the config names one).

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

PNG_SIZE_INCHES = (12, 8)
PNG_DPI = 100  # 1200 x 800 pixels; dev/test/test_ablate.sh checks the size
SMOOTH_FRACTION = 0.04  # the moving average spans about this fraction of the steps

STEP_RE = re.compile(r"^step (\d+)/(\d+) \| loss (\S+) \|.*\| ([0-9.]+) tok/s")
VAL_RE = re.compile(r"^step (\d+) \| val loss (\S+)")
SUMMARY_RE = re.compile(r"^summary: .*\| ([0-9.]+) tok/s \|.*peak memory ([0-9.]+) MiB")
MODEL_RE = re.compile(r"^model: scheme (\S+) \| n_layer=(\d+) n_embd=(\d+) n_head=(\d+) n_kv_head=(\d+) "
                      r"mlp=(\d+) bias=(\d+) tied=(\d+) T=(\d+) .*\| (\d+) parameters \|")
BATCH_RE = re.compile(r"^batch: .*\| (\d+) tokens per step \|")


def die(msg):
    print("report: " + msg, file=sys.stderr)
    sys.exit(1)


OUTPUTS = ("runs.csv", "loss.png", "table.md")


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
    path = os.path.join(out, "plan.tsv")
    if not os.path.isfile(path):
        die("%s: no such file (HINT: make ablate CONFIG=... writes it; pass the folder make ablate wrote)" % path)
    meta, runs = {}, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# "):
                k, _, v = line[2:].partition("\t")
                meta[k] = v
            elif line and not line.startswith("name\t"):
                name, scheme, steps, tps, command = line.split("\t", 4)
                runs.append(dict(name=name, scheme=scheme, steps=int(steps), tps=int(tps), command=command))
    return meta, runs


def read_run(out, run):
    """Fills run with its losses, summary, shape and parameter counts from its folder."""
    d = os.path.join(out, run["name"])
    run["done"] = os.path.isfile(os.path.join(d, "DONE"))
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
    if run["params"] and run["params"][0] != int(run["shape"]["n"]):  # two computations of one number
        print("report: warning: run %s: the trainer counts %s parameters, build/params %d" %
              (run["name"], run["shape"]["n"], run["params"][0]), file=sys.stderr)


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


def write_csv(out, runs):
    replace_file(os.path.join(out, "runs.csv"), lambda tmp: write_csv_to(tmp, runs))


def write_csv_to(path, runs):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "scheme", "kind", "step", "tokens", "loss", "tok_s"])
        for r in runs:
            for step, (loss, tok_s) in r["train"]:
                w.writerow([r["name"], r["scheme"], "train", step, step * r["tps"], "%.6f" % loss, "%.0f" % tok_s])
            for step, loss in r["val"]:
                w.writerow([r["name"], r["scheme"], "val", step, step * r["tps"], "%.6f" % loss, ""])


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


def write_png(out, runs, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    fig, axes = plt.subplots(1, 2, figsize=PNG_SIZE_INCHES, dpi=PNG_DPI)
    colors = plt.get_cmap("tab10" if len(runs) <= 10 else "tab20").colors
    max_tokens = max([r["steps"] * r["tps"] for r in runs] + [1])
    unit, unit_name = tokens_unit(max_tokens)
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
            if r["train"]:
                steps = [s for s, _ in r["train"]]
                smooth = centered_mean([l for _, (l, _) in r["train"]], smoothing_window(r["steps"]))
                xs = [s * r["tps"] / unit for s in steps]
                keep = [k for k, s in enumerate(steps) if s * r["tps"] >= start * max_tokens]
                ax.plot([xs[k] for k in keep], [smooth[k] for k in keep], color=st["color"], lw=st["lw"], ls=st["ls"],
                        zorder=2 + i)
                if keep:
                    lo, hi = min(lo, min(smooth[k] for k in keep)), max(hi, max(smooth[k] for k in keep))
            vals = [(s, l) for s, l in r["val"] if s * r["tps"] >= start * max_tokens]
            if vals:
                ax.plot([s * r["tps"] / unit for s, _ in vals], [l for _, l in vals], color=st["color"], ls="none",
                        marker=st["marker"], ms=st["ms"], mec="black", mew=0.5, zorder=20 + i)
                lo, hi = min(lo, min(l for _, l in vals)), max(hi, max(l for _, l in vals))
        ax.set_yscale("log")
        if hi > 0:
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
    handles += [Line2D([], [], color="gray", lw=2.0, label="line: train loss, centered mean of %s steps" %
                       "/".join(str(w) for w in windows)),
                Line2D([], [], color="gray", ls="none", marker="o", mec="black", mew=0.5, label="markers: validation loss")]
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


def write_table(out, meta, runs):
    baseline = meta.get("baseline", "")
    base = next((r for r in runs if r["name"] == baseline), None)
    base_loss = base["val"][-1][1] if base and base["val"] else None
    lines = ["# make ablate CONFIG=%s" % meta.get("config", ""), "",
             "Every run: %s training tokens of `%s`, seed %s, on the %s trainer." %
             (fmt_int(int(meta.get("tokens", "0"))), meta.get("data", "?"), meta.get("seed", "?"),
              {"gpu": "CUDA", "cpu": "CPU"}.get(meta.get("device"), "?")), "",
             "| run | scheme | shape | parameters | non-embedding | KV-cache bytes/token | tokens/s | peak memory (MiB) "
             "| final val loss | val loss vs %s | perplexity vs %s |" % (baseline or "standard", baseline or "standard"),
             "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in runs:
        s = r["shape"]
        shape = "L%s C%s H%s Hkv%s M%s bias%s" % (s["L"], s["C"], s["H"], s["Hkv"], s["M"], s["bias"]) if s else "?"
        total, nonemb, kvb = (fmt_int(x) for x in r["params"]) if r["params"] else ("?", "?", "?")
        tok_s, peak = ("{:,.0f}".format(r["summary"][0]), "{:,.0f}".format(r["summary"][1])) if r["summary"] else ("?", "?")
        final = r["val"][-1][1] if r["val"] else None
        if final is None or base_loss is None:
            dloss = dppl = "n/a"
        elif r is base:
            dloss = dppl = "baseline"
        else:
            a, b = relative(final, base_loss)
            dloss, dppl = "%+.2f%%" % a, "%+.2f%%" % b
        name = r["name"] + ("" if r["done"] else " (unfinished)")
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, r["scheme"], shape, total, nonemb, kvb, tok_s, peak,
            "%.4f" % final if final is not None else "?", dloss, dppl))
    lines.append("")
    if base_loss is None:
        lines.append("No baseline: the config has no run of scheme `standard` (and no `baseline = <run>`), so the "
                     "relative columns are n/a.")
    else:
        lines.append("Relative columns: 100·(L − L_base)/L_base for the final validation loss L, and "
                     "100·(exp(L − L_base) − 1) for the perplexity exp(L), against `%s`; positive = worse "
                     "(higher) than the baseline." % baseline)
    lines.append("Shape: n_layer, n_embd, n_head, n_kv_head, MLP hidden size, biases. Parameters (tied head, vocab "
                 "padded to 50304) and bf16 KV-cache bytes per token (inference) from build/params. tokens/s: the mean "
                 "over the timed steps (the trainer's summary line). Peak memory: GPU memory in use (CUDA trainer) or "
                 "maximum resident set size (CPU trainer).")
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
    meta, runs = read_plan(out)
    check_outputs(out, [os.path.join(out, r["name"], f) for r in runs for f in ("main.log", "stdout.log")])
    for r in runs:
        read_run(out, r)
    write_csv(out, runs)
    config = os.path.basename(meta.get("config", "?"))
    write_png(out, runs, "make ablate CONFIG=%s: train loss (smoothed) and validation loss, same data, seed and tokens"
              % meta.get("config", config))
    write_table(out, meta, runs)
    print("report: wrote %s/runs.csv, %s/loss.png, %s/table.md" % (out, out, out))


if __name__ == "__main__":
    main()
