"""
results_table.py: the README's table "The papers' questions on a GPU", from the ablation runs that came
back (dev/results/ablate/<config>/summary.csv, written by dev/ablate/report.py and copied there by
`dev/test/gpu_suite.sh --record-times`). Standard library only.

  python3 dev/ablate/results_table.py           print the table (markdown)
  python3 dev/ablate/results_table.py --check   exit 1 when README.md's table differs from it
  python3 dev/ablate/results_table.py --fix     rewrite README.md's table from it

The README holds the table between the lines RESULTS_BEGIN and RESULTS_END. Each row is a comparison a
paper made (PAPER_ROWS: the paper's own number against standard, typed from the paper as dev/SCHEMES.md
gives it) beside ours: the run's difference from the baseline in the config's summary.csv, mean ± sd
over the seeds done and Welch's p, as the paper reports it (val loss, or perplexity: 100·(exp(d) - 1)).
A run with no finished seed reads "not yet run", a run with some "k of n seeds": nothing is estimated.
"""
import csv
import math
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
RESULTS = os.environ.get("ABLATE_RESULTS_DIR") or os.path.join(ROOT, "dev", "results", "ablate")  # (tests: another)
README = os.path.join(ROOT, "README.md")
RESULTS_BEGIN = "<!-- results: python3 dev/ablate/results_table.py --fix writes this table -->"
RESULTS_END = "<!-- end of results -->"

# (config, its paper and scale, what the paper reports: loss or perplexity, [(run, label, the paper's delta)])
PAPER_ROWS = [
    ("wq_identity", "W_Q = I (GPT-2 small, 49B tokens; val loss)", "loss", [
        ("q_identity", "q_identity (wd 2^-5)", "+0.002 (3.018 vs 3.016)"),
        ("standard_mlp3.5", "standard, MLP 3.5·C", "+0.010 (3.026)"),
        ("standard_c744", "standard, C 744", "+0.011 (3.027)"),
        ("q_identity_mlp4.5", "q_identity, MLP 4.5·C", "-0.012 (3.004)")]),
    ("residual_query", "residual query (GPT-2 small, 29B tokens; val loss)", "loss", [
        ("q_residual", "q_residual", "-0.037 (2.919 vs 2.956)")]),
    ("shared_projections", "shared projections (300M, 10B tokens; perplexity)", "perplexity", [
        ("kv_shared", "kv_shared (Q-K=V)", "+3.1%"),
        ("qk_shared", "qk_shared (Q=K-V)", "+4.9%"),
        ("qkv_shared", "qkv_shared (Q=K=V)", "+25.4%"),
        ("gqa4", "GQA-4", "+0.7%"),
        ("mqa", "MQA", "+1.5%"),
        ("q_gqa4", "Q-GQA-4 (K = V, 4 kv heads)", "+3.9%"),
        ("q_mqa", "Q-MQA (K = V, 1 kv head)", "+4.8%")]),
]


def summary_rows(config):
    """{run: summary.csv row} of a config's recorded report, {} when none came back"""
    path = os.path.join(RESULTS, config, "summary.csv")
    if not os.path.isfile(path):
        return {}
    with open(path, newline="") as f:
        return {r["run"]: r for r in csv.DictReader(f)}


def ours(row, base, measure):
    """the cell of one run: its difference from the baseline as the paper measures it, the seeds, p"""
    if row is None or not row.get("n") or int(row["n"]) == 0:
        return "not yet run"
    n, seeds = int(row["n"]), len(row["seeds"].split())
    done = "%d seed%s" % (n, "" if n == 1 else "s") if n == seeds else "%d of %d seeds" % (n, seeds)
    if not row.get("diff_vs_baseline"):
        return "baseline not yet run (%s)" % done
    d = float(row["diff_vs_baseline"])
    se = " ± %.3f" % float(row["diff_se"]) if row.get("diff_se") else ""
    p = "; p = %.2g" % float(row["p_value"]) if row.get("p_value") else ""
    loss = "%.3f ± %.3f vs %.3f ± %.3f" % (float(row["final_val_loss_mean"]), float(row["final_val_loss_sd"] or 0),
                                           float(base["final_val_loss_mean"]), float(base["final_val_loss_sd"] or 0))
    if measure == "perplexity":
        return "%+.1f%% (%s%s, %s)" % (100 * (math.exp(d) - 1), loss, p, done)
    return "%+.3f%s (%s%s, %s)" % (d, se, loss, p, done)


def table():
    lines = ["| paper (its scale) | comparison | the paper vs standard | ours vs standard (d12, 11.4M tokens) |",
             "|---|---|---|---|"]
    for config, paper, measure, rows in PAPER_ROWS:
        summary = summary_rows(config)
        base = summary.get("standard")
        for i, (run, label, theirs) in enumerate(rows):
            lines.append("| %s | %s | %s | %s |" % (paper if i == 0 else "", label, theirs,
                                                    ours(summary.get(run), base, measure)))
    return "\n".join(lines)


def readme_table():
    """(README's text, the table's start and end offsets) or dies"""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    a, b = text.find(RESULTS_BEGIN), text.find(RESULTS_END)
    if a < 0 or b < a:
        sys.exit("results_table: README.md has no '%s' ... '%s' block" % (RESULTS_BEGIN, RESULTS_END))
    return text, a + len(RESULTS_BEGIN) + 1, b


def main():
    args = sys.argv[1:]
    if args not in ([], ["--check"], ["--fix"]):
        sys.exit("usage: python3 dev/ablate/results_table.py [--check | --fix]")
    want = table() + "\n"
    if not args:
        sys.stdout.write(want)
        return
    text, a, b = readme_table()
    if args == ["--check"]:
        if text[a:b] != want:
            sys.exit("results_table: README.md's results table differs from dev/results/ablate (HINT: python3 "
                     "dev/ablate/results_table.py --fix)")
        print("results_table: README.md's results table is dev/results/ablate's")
        return
    tmp = README + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text[:a] + want + text[b:])
    os.replace(tmp, README)
    print("results_table: wrote README.md's results table")


if __name__ == "__main__":
    main()
