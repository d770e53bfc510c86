#!/usr/bin/env bash
# Tests of `make ablate` (dev/ablate/): trains the toy config through the Makefile (three schemes x two
# seeds, real CPU training on Austen, forced onto the CPU trainer with ABLATE_DEVICE=cpu so that a GPU
# machine runs the same test; six runs of a few seconds), then checks: the time estimate printed before
# the first run; a folder per run and seed, each trained with its seed; the table printed at the end;
# runs.csv's columns and rows; loss.png's PNG header and size; table.md against build/params; the
# statistics of table.md and summary.csv against numbers recomputed here with numpy from the runs'
# main.log files (Welch's p by numerical integration of the t density); report.py's t distribution
# against textbook critical values; the tokens/s column and the load it was measured under (edited
# DONE files, and a run trained beside busy loops); that a second invocation retrains nothing; every
# shipped config valid (each run's command checked by its trainer, --check_args 1); the plan over 2
# hours refused without FORCE=1 (plan-only and real); one-line config errors; the table without a
# standard run; the restarts (-y 1 / --overwrite 1, per seed); and the bad input of issue 27 (a
# table of one-line config changes, a folder as CONFIG, OUT that is an input, report.py's outputs that
# are inputs or folders): each refused in one line naming the config line, file or flag, in plan-only
# and real mode, with nothing trained or written; the runs over GPUs (a fake nvidia-smi listing 3
# GPUs and the trainers on them: one run per GPU at a time, the fourth run on a freed GPU, each log
# naming its GPU, a GPU shared with a stranger's process marked and its tokens/s left out; the GPUs
# chosen by ABLATE_JOBS and CUDA_VISIBLE_DEVICES, and their bad values refused) and over CPU cores
# (two runs pinned to their own cores at once). One "PASS ablate ..." / "FAIL ablate ..." line per
# check; exits 1 if any failed. About 1-2 minutes on 2 cores (the toy's six runs are a third of it);
# the suite prints its time.
set -u
cd "$(dirname "$0")/../.."
source dev/test/jobs.sh # verdict_of
PY=${PYTHON:-/usr/bin/python3}
fails=0
pass() { echo "PASS ablate $*"; }
fail() { echo "FAIL ablate $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d /tmp/test_ablate.XXXXXX)
busy=()
trap 'for p in "${busy[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
suite_start=$SECONDS
out=$tmp/out
RUNS="standard kv_shared q_identity" # the runs of dev/ablate/toy.txt, in its order
SEEDS="1337 1338"                    # and its seeds
PNG_W=1200                           # report.py: 12 x 8 inches at 100 dpi
HEAD_CELLS=' [0-9.]* | [0-9.]* | [0-9.]* |'  # table.md's last three cells: induction, entropy, sink
PNG_H=800

# ---------------------------------------------------------------- the toy ablation, trained
start=$SECONDS
if ABLATE_DEVICE=cpu make -s --no-print-directory ablate CONFIG=dev/ablate/toy.txt OUT="$out" >"$tmp/run1.log" 2>&1; then
  pass "toy_config_trains: make ablate CONFIG=dev/ablate/toy.txt exited 0 in $((SECONDS - start)) s ($(grep -o 'run [a-z_]* seed [0-9]* done in [0-9]* s' "$tmp/run1.log" | sed 's/^run //' | paste -sd, - | sed 's/,/, /g'))"
else
  fail "toy_config_trains: make ablate exited non-zero after $((SECONDS - start)) s: $(grep -m1 '^ablate:.*\(failed\|exited\|error\)' "$tmp/run1.log" || tail -n 1 "$tmp/run1.log")"
  tail -n 5 "$tmp/run1.log" | sed 's/^/  /'
  echo "ablate: $fails failed"
  exit 1
fi

# the estimate: one line before the first run trains, of the form the README gives
est=$(grep -n '^ablate: plan: ' "$tmp/run1.log" | head -n 1)
first_run=$(grep -n '^ablate: run ' "$tmp/run1.log" | head -n 1 | cut -d: -f1)
if grep -Eq '^[0-9]+:ablate: plan: 6 runs \(3 runs x 2 seeds\) x 16 steps; estimated [0-9.]+ (s|min|h) on this machine \(calibrated: 2 steps of each of 3 shapes, [0-9]+ s(, other load [0-9]+%.*)?\)$' <<<"$est" &&
   [ -n "$first_run" ] && [ "${est%%:*}" -lt "$first_run" ]; then
  pass "estimate_before_training: line ${est%%:*} (the first run starts on line $first_run): '${est#*:}'"
else
  fail "estimate_before_training: '${est}' (first run on line ${first_run:-none}): expected 'ablate: plan: 6 runs (3 runs x 2 seeds) x 16 steps; estimated ... on this machine (calibrated: ...)' before it"
fi

# seeds: a folder per run and seed, each with DONE, trained with its seed (cmd.txt, the command the
# runner logged into stdout.log, and different losses at different seeds)
msg=""
for run in $RUNS; do
  for s in $SEEDS; do
    d=$out/$run/seed_$s
    [ -f "$d/DONE" ] || msg+="$d/DONE missing; "
    grep -q -- "-o $d --seed $s " "$d/cmd.txt" 2>/dev/null || msg+="$d/cmd.txt lacks '-o $d --seed $s'; "
    [ "$(head -n 1 "$d/stdout.log" 2>/dev/null)" = "$(cat "$d/cmd.txt" 2>/dev/null)" ] || msg+="$d/stdout.log's first line is not cmd.txt; "
  done
  a=$(grep -m1 '^step 1/' "$out/$run/seed_1337/main.log" 2>/dev/null | cut -d'|' -f2)
  b=$(grep -m1 '^step 1/' "$out/$run/seed_1338/main.log" 2>/dev/null | cut -d'|' -f2)
  { [ -n "$a" ] && [ "$a" != "$b" ]; } || msg+="$run: step 1's loss is '$a' at both seeds (the seed did not reach the trainer); "
done
n=$(find "$out" -name DONE | wc -l)
if [ -z "$msg" ] && [ "$n" = 6 ]; then
  pass "seeds_folders: 6 folders <run>/seed_<s>/ (3 runs x seeds $SEEDS), each trained with --seed s, step 1's loss differing between the seeds"
else
  fail "seeds_folders: $n DONE files; ${msg}"
fi

# make ablate ends by printing table.md
lines=$(wc -l <"$out/table.md")
if [ "$lines" -gt 5 ] && [ "$(tail -n "$lines" "$tmp/run1.log")" = "$(cat "$out/table.md")" ]; then
  pass "table_printed_at_end: the output's last $lines lines are table.md"
else
  fail "table_printed_at_end: the output ends '$(tail -n 2 "$tmp/run1.log" | paste -sd' ' - | cut -c1-200)', not table.md"
fi

# ---------------------------------------------------------------- runs.csv
if msg=$("$PY" - "$out/runs.csv" "$RUNS" "$SEEDS" <<'EOF'
import csv, math, sys
path, runs, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
rows = list(csv.reader(open(path)))
want = ["run", "scheme", "seed", "kind", "step", "tokens", "loss", "tok_s"]
if rows[0] != want:
    sys.exit("header %s, expected %s" % (",".join(rows[0]), ",".join(want)))
rows = [dict(zip(want, r)) for r in rows[1:]]
names = []
for r in rows:
    if r["run"] not in names:
        names.append(r["run"])
if names != runs:
    sys.exit("runs %s, expected %s" % (names, runs))
summary = []
for name in runs:
    for seed in seeds:
        mine = [r for r in rows if r["run"] == name and r["seed"] == seed]
        if any(r["scheme"] != name for r in mine):  # in the toy config each run is named after its scheme
            sys.exit("%s: scheme column is not %s" % (name, name))
        train = [r for r in mine if r["kind"] == "train"]
        val = [r for r in mine if r["kind"] == "val"]
        if len(train) + len(val) != len(mine):
            sys.exit("%s seed %s: a kind other than train/val" % (name, seed))
        steps = [int(r["step"]) for r in train]
        if steps != list(range(1, len(steps) + 1)) or len(steps) < 2:
            sys.exit("%s seed %s: train steps %s..., expected 1, 2, 3, ... (one row per step)" % (name, seed, steps[:5]))
        tps = int(train[0]["tokens"])
        for r in train + val:
            if int(r["tokens"]) != int(r["step"]) * tps or not math.isfinite(float(r["loss"])):
                sys.exit("%s: row %s: tokens is not step x %d, or the loss is not finite" % (name, r, tps))
        if any(float(r["tok_s"]) <= 0 for r in train) or any(r["tok_s"] != "" for r in val):
            sys.exit("%s: tok_s must be > 0 on train rows and empty on val rows" % name)
        if not val or int(val[-1]["step"]) != steps[-1]:
            sys.exit("%s seed %s: expected val rows ending at the last step %d" % (name, seed, steps[-1]))
        if not float(val[-1]["loss"]) < float(val[0]["loss"]) - 0.5:
            sys.exit("%s seed %s: the val loss did not go down by 0.5 (%s -> %s)" % (name, seed, val[0]["loss"],
                                                                                    val[-1]["loss"]))
        summary.append("%s/%s %d+%d rows, val %.2f -> %.2f" % (name, seed, len(train), len(val), float(val[0]["loss"]),
                       float(val[-1]["loss"])))
print("; ".join(summary))
EOF
); then pass "runs_csv: columns run,scheme,seed,kind,step,tokens,loss,tok_s; $msg"; else fail "runs_csv: $msg"; fi

# ---------------------------------------------------------------- loss.png
if msg=$("$PY" - "$out/loss.png" $PNG_W $PNG_H <<'EOF'
import os, struct, sys
path, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit("%s: no PNG signature" % path)
length, kind = struct.unpack(">I4s", data[8:16])
if kind != b"IHDR" or length != 13:
    sys.exit("%s: the first chunk is %r, expected IHDR" % (path, kind))
gw, gh = struct.unpack(">II", data[16:24])
if (gw, gh) != (w, h):
    sys.exit("%s: %dx%d pixels, expected %dx%d" % (path, gw, gh, w, h))
if len(data) < 30000 or b"IEND" not in data[-12:]:
    sys.exit("%s: %d bytes or no IEND chunk at the end: an empty or truncated picture?" % (path, len(data)))
print("%dx%d, %d bytes" % (gw, gh, len(data)))
EOF
); then pass "loss_png: valid PNG, $msg"; else fail "loss_png: $msg"; fi

# ---------------------------------------------------------------- table.md against build/params
# shape and parameters of each run: the table's row, the trainer's `model:` line, build/params
for run in $RUNS; do
  row=$(grep "^| $run | " "$out/table.md" || true)
  model=$(grep '^model: ' "$out/$run/seed_1337/stdout.log" | tail -n 1)
  read -r L C H Hkv M bias T <<<"$(sed -E 's/.*n_layer=([0-9]+) n_embd=([0-9]+) n_head=([0-9]+) n_kv_head=([0-9]+) mlp=([0-9]+) bias=([0-9]+) tied=1 (T|context)=([0-9]+) .*/\1 \2 \3 \4 \5 \6 \8/' <<<"$model")"
  ref=$(./build/params "$run" "$L" "$C" "$H" "$Hkv" "$M" "$bias" "$T" 2>&1) || ref=""
  want_total=$(sed -n 's/.* total=\([0-9]*\).*/\1/p' <<<"$ref")
  want_nonemb=$(sed -n 's/.* non_embedding=\([0-9]*\).*/\1/p' <<<"$ref")
  want_kvb=$(sed -n 's/.* kv_bytes_per_token=\([0-9]*\).*/\1/p' <<<"$ref")
  IFS='|' read -r _ _ scheme shape total nonemb kvb _ <<<"$row"
  got="$(echo $scheme) | $(echo $shape) | $(echo $total | tr -d ,) | $(echo $nonemb | tr -d ,) | $(echo $kvb | tr -d ,)"
  want="$run | L$L C$C H$H Hkv$Hkv M$M bias$bias | $want_total | $want_nonemb | $want_kvb"
  if [ -n "$row" ] && [ -n "$want_total" ] && [ "$got" = "$want" ]; then
    pass "table_params_$run: scheme | shape | parameters | non-embedding | KV bytes/token = $got, as build/params $run $L $C $H $Hkv $M $bias $T"
  else
    fail "table_params_$run: table.md has '${got}', build/params $run $L $C $H $Hkv $M $bias $T gives '$want' (${ref:-no output})"
  fi
done

# ---------------------------------------------------------------- the statistics, recomputed
# From each run's seed folders' main.log (the last "val loss" line), with numpy: mean and sd (ddof 1)
# over the seeds, the difference from standard and its standard error, Welch's t and df, and the
# two-sided p by integrating the t density numerically (not report.py's continued fraction); against
# summary.csv (to 1e-5) and table.md's cells (as printed).
stats_check() { # OUT RUNS SEEDS: prints a summary or exits 1 with why
  "$PY" - "$@" <<'EOF'
import csv, math, re, sys
import numpy as np
out, runs, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
final = {}
for r in runs:
    final[r] = []
    for s in seeds:
        vals = [float(m.group(1)) for m in re.finditer(r"^step \d+ \| val loss (\S+)", open("%s/%s/seed_%s/main.log" % (out, r, s)).read(), re.M)]
        final[r].append(vals[-1])
def t_p(t, df):  # two-sided p: 2 * integral of the t density from |t| to infinity (x = |t| + u/(1-u))
    u = np.linspace(0.0, 1.0, 400001)[:-1]
    x = abs(t) + u / (1 - u)
    dens = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi) * (1 + x * x / df) ** (-(df + 1) / 2)
    return 2 * np.trapz(dens / (1 - u) ** 2, u)
summ = {row["run"]: row for row in csv.DictReader(open(out + "/summary.csv"))}
table = {}
for line in open(out + "/table.md"):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 17 and cells[0] in runs:
        table[cells[0]] = cells
base = np.array(final["standard"])
notes = []
for r in runs:
    x = np.array(final[r])
    m, sd = x.mean(), x.std(ddof=1)
    row, cells = summ.get(r), table.get(r)
    if row is None or cells is None:
        sys.exit("%s: no row in summary.csv or table.md" % r)
    if abs(float(row["final_val_loss_mean"]) - m) > 1e-5 or abs(float(row["final_val_loss_sd"]) - sd) > 1e-5:
        sys.exit("%s: summary.csv mean/sd %s/%s, numpy %.6f/%.6f" % (r, row["final_val_loss_mean"], row["final_val_loss_sd"], m, sd))
    if cells[8] != str(len(seeds)) or cells[9] != "%.4f ± %.4f" % (m, sd):
        sys.exit("%s: table.md seeds '%s', final '%s'; expected %d, '%.4f ± %.4f'" % (r, cells[8], cells[9], len(seeds), m, sd))
    if r == "standard":
        if cells[10:14] != ["baseline"] * 4:
            sys.exit("standard: expected 'baseline' in the relative cells, got %s" % cells[10:14])
        continue
    va, vb = x.var(ddof=1) / len(x), base.var(ddof=1) / len(base)
    se = math.sqrt(va + vb)
    t = (m - base.mean()) / se
    df = (va + vb) ** 2 / (va ** 2 / (len(x) - 1) + vb ** 2 / (len(base) - 1))
    p = t_p(t, df)
    got = [float(row[k]) for k in ("diff_vs_baseline", "diff_se", "welch_t", "welch_df", "p_value")]
    want = [m - base.mean(), se, t, df, p]
    if any(abs(g - w) > 1e-4 * max(1, abs(w)) for g, w in zip(got, want)):
        sys.exit("%s: summary.csv diff, se, t, df, p = %s; numpy %s" % (r, got, ["%.6g" % w for w in want]))
    rel = 100 * (m - base.mean()) / base.mean()
    verdict = ("worse" if m > base.mean() else "better") if p < 0.05 else "no detectable difference"
    want_cells = ["%+.2f%%" % rel, "%+.2f%%" % (100 * (math.exp(m - base.mean()) - 1)), "%+.4f ± %.4f" % (m - base.mean(), se),
                  "p = %.2g (t = %.2f, df = %.1f, n = %d vs %d): %s" % (p, t, df, len(x), len(base), verdict)]
    if cells[10:14] != want_cells:
        sys.exit("%s: table.md %s, expected %s" % (r, cells[10:14], want_cells))
    notes.append("%s %+.4f ± %.4f p=%.2g df=%.1f" % (r, m - base.mean(), se, p, df))
print("; ".join(notes))
EOF
}
if msg=$(stats_check "$out" "$RUNS" "$SEEDS" 2>&1); then
  pass "statistics: mean ± sd, difference ± SE, Welch t, df, p in summary.csv and table.md match numpy on the main.log files ($msg)"
else
  fail "statistics: $msg"
fi

# ---------------------------------------------------------------- the head diagnostics
# each run and seed has heads.csv (the trainer's --attention_csv on its final model: a row per layer
# and head); summary.csv's induction/entropy/sink means and table.md's last three cells are the means
# over the heads, then the seeds, recomputed here
heads_check() { # OUT RUNS SEEDS: prints a summary or exits 1 with why
  "$PY" - "$@" <<'EOF'
import csv, sys
out, runs, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
cols = ("induction", "entropy", "sink")
summ = {row["run"]: row for row in csv.DictReader(open(out + "/summary.csv"))}
table = {}
for line in open(out + "/table.md"):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 17 and cells[0] in runs:
        table[cells[0]] = cells
notes = []
for r in runs:
    per_seed = []
    for s in seeds:
        rows = list(csv.DictReader(open("%s/%s/seed_%s/heads.csv" % (out, r, s))))
        if len(rows) != 2 * 2:  # toy.txt: 2 layers x 2 heads
            sys.exit("%s seed %s: heads.csv has %d rows, expected 4 (2 layers x 2 heads)" % (r, s, len(rows)))
        per_seed.append([sum(float(x[c]) for x in rows) / len(rows) for c in cols])
    want = [sum(v[i] for v in per_seed) / len(per_seed) for i in range(3)]
    got = [float(summ[r]["%s_mean" % c]) for c in cols]
    if any(abs(g - w) > 1e-5 for g, w in zip(got, want)):
        sys.exit("%s: summary.csv %s, recomputed %s" % (r, got, want))
    if r not in table or table[r][14:17] != ["%.3f" % w for w in want]:
        sys.exit("%s: table.md cells %s, expected %s" % (r, table.get(r, ["?"] * 17)[14:17], ["%.3f" % w for w in want]))
    notes.append("%s %s" % (r, "/".join("%.3f" % w for w in want)))
print("; ".join(notes))
EOF
}
if msg=$(heads_check "$out" "$RUNS" "$SEEDS" 2>&1); then
  pass "head_diagnostics: heads.csv for every run and seed; induction/entropy/sink in summary.csv and table.md are their means ($msg)"
else
  fail "head_diagnostics: $msg"
fi

# report.py's Student t tail against textbook two-sided 5% critical values, a non-integer df and an
# extreme t against numerical integration, t = 0, and welch() on a worked example
if msg=$(cd dev/ablate && "$PY" - 2>&1 <<'EOF'
import math, sys
import numpy as np
import report
def integral(t, df):
    u = np.linspace(0.0, 1.0, 400001)[:-1]
    x = abs(t) + u / (1 - u)
    dens = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi) * (1 + x * x / df) ** (-(df + 1) / 2)
    return 2 * np.trapz(dens / (1 - u) ** 2, u)
checks = [(2.776, 4, 0.05, 2e-4), (12.706, 1, 0.05, 2e-4), (2.228, 10, 0.05, 2e-4), (4.604, 4, 0.01, 1e-4),
          (1.96, 1e7, 0.05, 2e-4), (0.0, 3, 1.0, 1e-12)]
for t, df, want, tol in checks + [(2.5, 3.37, integral(2.5, 3.37), 1e-6), (-7.3, 1.6, integral(7.3, 1.6), 1e-6),
                                  (30.0, 2.2, integral(30.0, 2.2), 1e-7)]:
    got = report.t_two_sided_p(t, df)
    if not abs(got - want) <= tol:
        sys.exit("t = %g, df = %g: p = %.6g, expected %.6g (within %g)" % (t, df, got, want, tol))
# Welch by hand: a = 1, 2, 3 (mean 2, var 1), b = 4, 6, 8, 10 (mean 7, var 20/3): se^2 = 1/3 + 5/3 = 2
# t = -5 / sqrt(2), df = 4 / ((1/3)^2 / 2 + (5/3)^2 / 3) = 4 / (1/18 + 25/27) = 4.0755
d, se, t, df, p = report.welch([1.0, 2.0, 3.0], [4.0, 6.0, 8.0, 10.0])
if abs(d + 5) > 1e-12 or abs(se - math.sqrt(2)) > 1e-12 or abs(df - 4 / (1 / 18 + 25 / 27)) > 1e-9 or abs(p - integral(t, df)) > 1e-6:
    sys.exit("welch: d %g se %g df %g p %g" % (d, se, df, p))
if report.welch([1.0], [2.0, 3.0]) is not None or report.welch([1.0, 1.0], [2.0, 2.0]) is not None:
    sys.exit("welch: one value, or no spread, must give None")
print("2.776/4, 12.706/1, 2.228/10 -> 0.05, 4.604/4 -> 0.01, df 3.37/1.6/2.2 = integration, welch worked example df %.4f p %.4f" % (df, p))
EOF
); then pass "welch_p_values: $msg"; else fail "welch_p_values: $msg"; fi

# ---------------------------------------------------------------- tokens/s and the load
# each run's tokens/s cell: its seeds' mean tok/s with the largest other load from their DONE files,
# or n/a above 10%; then DONE files edited to 3% and 25% (and without the load) on a copy
load_cell_check() { # OUT: prints the cells or exits 1
  "$PY" - "$1" "$RUNS" "$SEEDS" <<'EOF'
import re, sys
out, runs, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
cells = {}
for line in open(out + "/table.md"):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) == 17 and c[0] in runs:
        cells[c[0]] = c[6]
for r in runs:
    loads, toks = [], []
    for s in seeds:
        d = "%s/%s/seed_%s" % (out, r, s)
        done = dict(l.split(" ", 1) for l in open(d + "/DONE").read().splitlines())
        loads.append(float(done["other_load"]) if "other_load" in done else None)
        toks.append(float(re.search(r"^summary: .*\| ([0-9.]+) tok/s", open(d + "/main.log").read(), re.M).group(1)))
    tok = sum(toks) / len(toks)
    if None in loads:
        want = "{:,.0f} (load not measured)".format(tok)
    elif max(loads) > 0.10:
        want = "n/a (shared machine, %.0f%% other load)" % (100 * max(loads))
    else:
        want = "{:,.0f} (other load {:.0f}%)".format(tok, 100 * max(loads))
    if cells.get(r) != want:
        sys.exit("%s: tokens/s cell '%s', expected '%s'" % (r, cells.get(r), want))
print(", ".join("%s '%s'" % (r, cells[r]) for r in runs))
EOF
}
bad_load=""
for run in $RUNS; do for s in $SEEDS; do
  grep -Eq '^other_load (0|1)\.[0-9]{4}$' "$out/$run/seed_$s/DONE" && grep -q '^cores [1-9]' "$out/$run/seed_$s/DONE" || bad_load+=" $run/seed_$s"
done; done
if [ -z "$bad_load" ] && msg=$(load_cell_check "$out" 2>&1); then
  pass "load_column: every DONE has other_load and cores; the table's cells: $msg"
else
  fail "load_column: DONE without other_load/cores:${bad_load:- none}; ${msg:-}"
fi
cp -r "$out" "$tmp/out_load"
for s in $SEEDS; do
  sed -i 's/^other_load .*/other_load 0.0300/' "$tmp/out_load/standard/seed_$s/DONE"
  sed -i 's/^other_load .*/other_load 0.0100/' "$tmp/out_load/kv_shared/seed_$s/DONE"
done
sed -i 's/^other_load .*/other_load 0.2500/' "$tmp/out_load/kv_shared/seed_1338/DONE"
sed -i '/^other_load /d' "$tmp/out_load/q_identity/seed_1337/DONE"
if "$PY" dev/ablate/report.py "$tmp/out_load" >/dev/null 2>"$tmp/load.err" && msg=$(load_cell_check "$tmp/out_load" 2>&1) &&
   grep -q '^| standard | .*| [0-9,]* (other load 3%) |' "$tmp/out_load/table.md" &&
   grep -q '^| kv_shared | .*| n/a (shared machine, 25% other load) |' "$tmp/out_load/table.md" &&
   grep -q '^| q_identity | .*| [0-9,]* (load not measured) |' "$tmp/out_load/table.md"; then
  pass "load_column_edited: 3% -> the speed with its load, 1% and 25% -> n/a at 25%, no load -> 'load not measured' ($msg)"
else
  fail "load_column_edited: $(head -c 300 "$tmp/load.err") ${msg:-}"
fi

# ---------------------------------------------------------------- one seed: the test is n/a
# the toy's runs reported as if the config had one seed (plan.tsv's rows of seed 1337 only)
cp -r "$out" "$tmp/out_1seed"
awk -F'\t' '!/^#/ && $1 != "name" && $3 != "1337" { next } { print }' "$out/plan.tsv" | sed 's/^# seeds\t.*/# seeds\t1337/' >"$tmp/out_1seed/plan.tsv"
if "$PY" dev/ablate/report.py "$tmp/out_1seed" >/dev/null 2>"$tmp/1seed.err" &&
   [ "$(grep -c "| n/a (1 seed) |$HEAD_CELLS\$" "$tmp/out_1seed/table.md")" = 2 ] && ! grep '^| ' "$tmp/out_1seed/table.md" | grep -q '±' &&
   grep -q "^| q_identity | .* | 1 | [0-9.]* | [-+][0-9.]*% | [-+][0-9.]*% | [-+][0-9.]* | n/a (1 seed) |$HEAD_CELLS\$" "$tmp/out_1seed/table.md"; then
  pass "one_seed_is_na: 1 seed per run: no ± anywhere, the difference without SE, the test 'n/a (1 seed)'"
else
  fail "one_seed_is_na: $(head -c 300 "$tmp/1seed.err") $(grep '^| q_identity' "$tmp/out_1seed/table.md" 2>/dev/null)"
fi

# ---------------------------------------------------------------- resumable: nothing is redone
sums=$(cat "$out"/*/*/main.log | md5sum)
start=$SECONDS
if ABLATE_DEVICE=cpu make -s --no-print-directory ablate CONFIG=dev/ablate/toy.txt OUT="$out" >"$tmp/run2.log" 2>&1; then
  skips=$(grep -c '^ablate: skip ' "$tmp/run2.log")
  trained=$(grep -c '^ablate: run ' "$tmp/run2.log")
  if [ "$skips" = 6 ] && [ "$trained" = 0 ] && [ "$(cat "$out"/*/*/main.log | md5sum)" = "$sums" ] &&
     grep -q '^ablate: plan: nothing to train' "$tmp/run2.log" && [ "$(tail -n "$lines" "$tmp/run2.log")" = "$(cat "$out/table.md")" ]; then
    pass "second_invocation_skips: 6 runs skipped, none trained (plan: nothing to train), main.log files unchanged, the table printed again, $((SECONDS - start)) s"
  else
    fail "second_invocation_skips: $skips skip lines, $trained runs trained (expected 6 and 0), main.log $( [ "$(cat "$out"/*/*/main.log | md5sum)" = "$sums" ] && echo unchanged || echo changed), plan line '$(grep '^ablate: plan' "$tmp/run2.log")'"
  fi
else
  fail "second_invocation_skips: make ablate exited non-zero: $(tail -n 1 "$tmp/run2.log")"
fi

# ---------------------------------------------------------------- every shipped config is valid
# ABLATE_PLAN_ONLY: the config, then each run's command checked by its trainer (--check_args 1: no
# training, nothing created); with the CPU trainers, which take the shipped configs' flags (the CUDA
# ones would be nvcc builds). A corpus not prepared here is checked against synthetic shards, which
# the runner must say (the data headers were not checked). Plan-only skips the estimate and says so.
start=$SECONDS
for cfg in dev/ablate/*.txt; do
  data=$(sed -n 's/^data *= *\([a-z]*\).*/\1/p' "$cfg")
  if msg=$(ABLATE_PLAN_ONLY=1 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$cfg" 2>&1); then
    checked=$(grep -c '^ablate: [^ ]*\( seed [0-9]*\)\? ([a-z_]*, [0-9]* steps x [0-9]* tokens): ./build/train_gpt2_cpu_' <<<"$msg")
    if [ -n "$data" ] && ! compgen -G "dev/data/$data/${data}_train_*.bin" >/dev/null &&
       ! grep -q "^ablate: note: dev/data/$data is not prepared: .*synthetic shard.* NOT checked" <<<"$msg"; then
      fail "config_valid_$(basename "$cfg" .txt): dev/data/$data is not prepared, and the plan does not say that the data headers went unchecked"
    elif grep -q '^max_epochs = 1' "$cfg" && ! grep -q '^ablate: data: each run reads [0-9,]* training tokens, 1.00 epoch of \|^ablate: note: max_epochs = 1 is not checked: the training shards .* cannot be read yet' <<<"$msg"; then
      fail "config_valid_$(basename "$cfg" .txt): max_epochs = 1, but neither its one epoch nor that it went unchecked is said: $(grep '^ablate: \(data\|note\)' <<<"$msg" | paste -sd' ' -)"
    elif [ "$data" = mix ] && ! grep -Eq "^ablate: plan on a GPU: $((checked)) runs \([0-9]+ x 3 seeds\) predicted [0-9]+ (s|min) on one GPU from each scheme's latest measured d12 tokens/s \(NVIDIA" <<<"$msg"; then
      fail "config_valid_$(basename "$cfg" .txt): no GPU estimate from the recorded speeds for its $checked runs: $(grep '^ablate: plan' <<<"$msg" | paste -sd' ' -)"
    elif grep -q "checked by [a-z]* trainers* (--check_args 1)" <<<"$msg" && [ "$checked" -ge 1 ] &&
         grep -q '^ablate: plan: .*; time estimate skipped (plan-only calibrates with ABLATE_ESTIMATE=1' <<<"$msg"; then
      pass "config_valid_$(basename "$cfg" .txt): $(head -n 1 <<<"$msg" | sed 's/^ablate: //')$(grep -q 'NOT checked' <<<"$msg" && echo " (corpus not prepared here: synthetic shards, said so)")$(grep -m1 '^ablate: plan on a GPU' <<<"$msg" | sed 's/^ablate: plan on a GPU: \([^(]*\)(.* predicted \([0-9]* [a-z]*\) .*/; on a GPU: \1predicted \2/')$(grep -m1 '^ablate: data: ' <<<"$msg" | sed 's/.*, \([0-9.]* epochs\{0,1\}\) of.*/; \1/')"
    else
      fail "config_valid_$(basename "$cfg" .txt): exit 0 but no trainer check or plan line reported: $(head -n 2 <<<"$msg" | paste -sd' ' -) $(grep '^ablate: plan' <<<"$msg")"
    fi
  else
    fail "config_valid_$(basename "$cfg" .txt): $(head -n 3 <<<"$msg" | paste -sd' ' -)"
  fi
done
if grep -q '^seeds = 1337 1338 1339 ' dev/ablate/cpu.txt && [ "$(grep -Ec '^(standard|q_identity|kv_shared|qkv_shared) +(standard|q_identity|kv_shared|qkv_shared)$' dev/ablate/cpu.txt)" = 4 ]; then
  pass "cpu_config: dev/ablate/cpu.txt trains standard, q_identity, kv_shared, qkv_shared at 3 seeds"
else
  fail "cpu_config: dev/ablate/cpu.txt lacks 'seeds = 1337 1338 1339' or one of its four scheme runs"
fi
echo "ablate: the shipped configs checked in $((SECONDS - start)) s"

# ---------------------------------------------------------------- config errors
sed 's/^kv_shared   kv_shared$/kv_shared   kv_sharde/' dev/ablate/toy.txt >"$tmp/bad.txt"
bad_line=$(grep -n '^kv_shared   kv_sharde$' "$tmp/bad.txt" | cut -d: -f1)
ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/bad.txt" "$tmp/out_bad" >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
if [ -n "$bad_line" ] && [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/bad.err")" = 1 ] && [ ! -s "$tmp/bad.out" ] &&
   grep -q "^ablate: $tmp/bad.txt:$bad_line: unknown scheme 'kv_sharde'.*HINT: one of standard" "$tmp/bad.err"; then
  pass "unknown_scheme_is_one_line: exit $rc, '$(cat "$tmp/bad.err")'"
else
  fail "unknown_scheme_is_one_line: exit $rc, stderr '$(head -c 400 "$tmp/bad.err")', stdout '$(head -c 200 "$tmp/bad.out")' (expected one line naming $tmp/bad.txt:$bad_line and the scheme)"
fi
sed 's/^kv_shared   kv_shared$/standard    kv_shared/' dev/ablate/toy.txt >"$tmp/dup.txt"
ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/dup.txt" "$tmp/out_dup" >/dev/null 2>"$tmp/dup.err"
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/dup.err")" = 1 ] && grep -q "run name 'standard' is used twice" "$tmp/dup.err"; then
  pass "duplicate_run_name_is_one_line: exit $rc, '$(cat "$tmp/dup.err")'"
else
  fail "duplicate_run_name_is_one_line: exit $rc, stderr '$(head -c 400 "$tmp/dup.err")'"
fi

# ---------------------------------------------------------------- no standard run: n/a columns
# the same runs reported as if the config had no baseline (plan.tsv's baseline line emptied)
cp -r "$out" "$tmp/out_nobase"
sed -i 's/^# baseline\t.*/# baseline\t/' "$tmp/out_nobase/plan.tsv"
if "$PY" dev/ablate/report.py "$tmp/out_nobase" >/dev/null 2>"$tmp/nobase.err" &&
   [ "$(grep -c "| n/a | n/a | n/a | n/a |$HEAD_CELLS\$" "$tmp/out_nobase/table.md")" = 3 ] && grep -q '^No baseline' "$tmp/out_nobase/table.md" &&
   grep -q '^kv_shared,kv_shared,1337 1338,2,[0-9.]*,[0-9.]*,,,,,,' "$tmp/out_nobase/summary.csv"; then
  pass "no_baseline_gives_na: every relative cell n/a, a line saying why, summary.csv's comparison columns empty"
else
  fail "no_baseline_gives_na: $(head -c 300 "$tmp/nobase.err") $(grep -c 'n/a' "$tmp/out_nobase/table.md" 2>/dev/null) n/a rows"
fi

# ---------------------------------------------------------------- restarts: -y 1 only with a checkpoint
# A one-run config on the tiny fixture (seconds). The trainer refuses -y 1 with nothing to resume and
# a fresh run into a used folder, so the runner must choose: (1) a folder with only the main.log of an
# attempt that died before its first checkpoint starts again with --overwrite 1; (2) per seed: with
# seeds = 1 2, seed_1 holds such a main.log and seed_2 checkpoints at steps 2 and 4 of 8 (the plan's
# command run by hand, its later checkpoints removed): one make ablate restarts seed 1 and resumes
# seed 2 from step 4.
"$PY" dev/test/synth_shards.py "$tmp"
cat >"$tmp/restart.txt" <<EOF2
train = $tmp/synth_train_*.bin
val = $tmp/synth_val_*.bin
seed = 1337
tokens = 8 * 128
eval_every = 4
checkpoint_every = 2
flags = -e dev/fixtures/standard_tiny_model.bin -b 4 -t 32 -l 1e-3 -m 1
standard standard
EOF2
mkdir -p "$tmp/restart1/standard" && echo "a log of an attempt that died at step 1" >"$tmp/restart1/standard/main.log"
ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/restart.txt" "$tmp/restart1" >"$tmp/restart1.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ -f "$tmp/restart1/standard/DONE" ] && grep -q "^--overwrite 1: removed the previous run's files from $tmp/restart1/standard: main.log$" "$tmp/restart1/standard/stdout.log" &&
   ! grep -q 'died at step 1' "$tmp/restart1/standard/main.log" && [ "$(grep -c '^step [0-9]/8 | loss' "$tmp/restart1/standard/main.log")" = 8 ]; then
  pass "restart_without_checkpoint: a folder with only an old main.log starts again with --overwrite 1 (8 steps, the old log replaced)"
else
  fail "restart_without_checkpoint: exit $rc: $(grep -m1 'error\|ablate:.*exited' "$tmp/restart1.log" "$tmp/restart1/standard/stdout.log" 2>/dev/null | head -n 1)"
fi
sed 's/^seed = 1337$/seeds = 1 2/' "$tmp/restart.txt" >"$tmp/restart_seeds.txt"
plan=$(ABLATE_PLAN_ONLY=1 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/restart_seeds.txt" "$tmp/restart2" 2>&1 | sed -n 's/^ablate: standard seed 2 (standard, 8 steps x 128 tokens): //p')
read -ra planned <<<"$plan"
mkdir -p "$tmp/restart2/standard/seed_1" "$tmp/restart2/standard/seed_2"
echo "a log of an attempt that died at step 1" >"$tmp/restart2/standard/seed_1/main.log"
# the trainer resumes only with the settings it was started with: seed 2 trains its 8 steps by hand and
# loses its checkpoints after step 4, as if it had died there
if [ ${#planned[@]} -gt 0 ] && "${planned[@]}" >"$tmp/restart2_first.log" 2>&1 &&
   rm "$tmp/restart2/standard/seed_2/"{model,state}_0000000[68].bin && [ -f "$tmp/restart2/standard/seed_2/state_00000004.bin" ]; then
  ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/restart_seeds.txt" "$tmp/restart2" >"$tmp/restart2.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && [ -f "$tmp/restart2/standard/seed_1/DONE" ] && [ -f "$tmp/restart2/standard/seed_2/DONE" ] &&
     grep -q "^ablate: run standard seed 1 (standard) on the CPU: .* (--overwrite 1)$" "$tmp/restart2.log" &&
     grep -q "^ablate: run standard seed 2 (standard) on the CPU: .* (-y 1)$" "$tmp/restart2.log" &&
     grep -q "^resuming from $tmp/restart2/standard/seed_2/state_00000004.bin at step 4" "$tmp/restart2/standard/seed_2/stdout.log" &&
     grep -q -- "--seed 2 " "$tmp/restart2/standard/seed_2/cmd.txt"; then
    pass "restart_per_seed: seed 1 (an old main.log) starts again with --overwrite 1, seed 2 resumes from its step-4 checkpoint with -y 1"
  else
    fail "restart_per_seed: exit $rc: $(grep '^ablate: run \|error' "$tmp/restart2.log" | head -n 3 | paste -sd' ' -)"
  fi
else
  fail "restart_per_seed: the plan's command of seed 2 did not write a checkpoint at step 4 (plan: '${plan}': $(tail -n 1 "$tmp/restart2_first.log" 2>/dev/null))"
fi

# ---------------------------------------------------------------- load measured beside busy loops
# the fixture run again (about a second), while one busy loop per core runs: the other load the
# runner stores in DONE must show them (>= 30%; each loop would take a core alone)
cores=$(grep -c '^cpu[0-9]' /proc/stat)
for _ in $(seq "$cores"); do (while :; do :; done) & busy+=($!); done
ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/restart.txt" "$tmp/restart_busy" >"$tmp/busy.log" 2>&1
rc=$?
for p in "${busy[@]}"; do kill "$p" 2>/dev/null; done
busy=()
load=$(sed -n 's/^other_load //p' "$tmp/restart_busy/standard/DONE" 2>/dev/null)
if [ $rc -eq 0 ] && [ -n "$load" ] && awk -v l="$load" 'BEGIN { exit !(l >= 0.3) }' &&
   grep -q '^| standard | .*| n/a (shared machine, [0-9]*% other load) |' "$tmp/restart_busy/table.md"; then
  pass "load_measured: with $cores busy loops beside the run, DONE says other_load $load and table.md leaves tokens/s out"
else
  fail "load_measured: exit $rc, other_load '${load}' (expected >= 0.3 with $cores busy loops): $(grep '^| standard' "$tmp/restart_busy/table.md" 2>/dev/null | cut -c1-200)"
fi

# ---------------------------------------------------------------- runs over GPUs (issue 32)
# The scheduling across GPUs, on a CPU: dev/test/fake_nvidia_smi.sh, linked as nvidia-smi first on
# PATH, lists 3 GPUs, and as their compute processes the CPU trainers running now, each on the GPU its
# own CUDA_VISIBLE_DEVICES names (read from /proc: what the runner really gave it), plus a process of
# somebody else on GPU 1. ABLATE_TEST_FAKE_GPUS=1 schedules as for the CUDA trainer but trains on the
# CPU trainer. Four runs (about a second each) on 3 GPUs: the first three start at once, one per GPU,
# the fourth when one ends, on the GPU that freed; no GPU holds two runs at once; each run's log and
# DONE name its GPU; the run(s) on GPU 1 are marked shared and their tokens/s left out.
start=$SECONDS
mkdir -p "$tmp/fakebin" && ln -sf "$PWD/dev/test/fake_nvidia_smi.sh" "$tmp/fakebin/nvidia-smi"
fake_env=(env -u CUDA_VISIBLE_DEVICES PATH="$tmp/fakebin:$PATH" ABLATE_TEST_FAKE_GPUS=1)
sed -e 's/^tokens = .*/tokens = 256 * 128/' -e 's/^eval_every = .*/eval_every = 128/' -e '/^checkpoint_every/d' \
    -e '/^standard standard$/d' "$tmp/restart.txt" >"$tmp/gpus.txt"
printf 'r%s standard\n' 0 1 2 3 >>"$tmp/gpus.txt"
"${fake_env[@]}" FAKE_FOREIGN=1:424242 ABLATE_STATUS_S=1 bash dev/ablate/ablate.sh "$tmp/gpus.txt" "$tmp/gpus" >"$tmp/gpus.log" 2>&1
rc=$?
if msg=$("$PY" - "$tmp/gpus" "$tmp/gpus.log" $rc 2>&1 <<'EOF'
import re, sys
out, log, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(log).read()
if rc != 0:
    sys.exit("exit %d: %s" % (rc, " ".join(l for l in text.splitlines() if "error" in l or "exited" in l)[:300]))
events = []  # ("start" | "done", run, gpu) in the order the runner printed them
for line in text.splitlines():
    m = re.match(r"^ablate: run (r\d) \(standard\) on gpu (\d): 256 steps x 128 tokens", line)
    if m:
        events.append(("start", m.group(1), m.group(2)))
    m = re.match(r"^ablate: run (r\d) done in \d+ s on gpu (\d) \(", line)
    if m:
        events.append(("done", m.group(1), m.group(2)))
if events[:3] != [("start", "r0", "0"), ("start", "r1", "1"), ("start", "r2", "2")] or len(events) != 8:
    sys.exit("events %s: expected r0, r1, r2 started on gpu 0, 1, 2 first, 8 events" % events)
i = next(k for k, e in enumerate(events) if e[:2] == ("start", "r3"))
freed = [e[2] for e in events[:i] if e[0] == "done"]
if not freed or events[i][2] not in freed:
    sys.exit("r3 started on gpu %s, but the GPUs freed before it were %s" % (events[i][2], freed))
if not re.search(r"^ablate: plan: 4 runs .*, 3 runs at a time \(calibrated", text, re.M):
    sys.exit("no plan line with ', 3 runs at a time'")
if not re.search(r"^ablate: where: 3 runs at a time, one per GPU: gpu 0 \(Fake GPU 0, GPU-fake-0\), gpu 1 \(Fake GPU 1, "
                 r"GPU-fake-1\), gpu 2 \(Fake GPU 2, GPU-fake-2\); the CPU trainer", text, re.M):
    sys.exit("no 'where:' line naming the 3 GPUs")
if not re.search(r"^ablate: [1-3] training \((r\d on gpu \d at (step \d+/256|starting)(, )?)+\); [01] waiting$", text, re.M):
    sys.exit("no progress line (ABLATE_STATUS_S=1)")
spans, table = {}, open(out + "/table.md").read()
for r in ("r0", "r1", "r2", "r3"):
    done = dict(l.split(" ", 1) for l in open("%s/%s/DONE" % (out, r)).read().splitlines())
    gpu = re.match(r"^gpu (\d) \(Fake GPU (\d), GPU-fake-(\d)\)$", done.get("device", ""))
    if not gpu or len(set(gpu.groups())) != 1:
        sys.exit("%s: DONE's device '%s'" % (r, done.get("device")))
    g = gpu.group(1)
    second = open("%s/%s/stdout.log" % (out, r)).read().splitlines()[1]
    if second != "# on gpu %s (Fake GPU %s, GPU-fake-%s), CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=%s OMP_NUM_THREADS=1" % (g, g, g, g):
        sys.exit("%s: stdout.log's second line '%s'" % (r, second))
    if done.get("jobs") != "3" or done.get("gpu_shared") != ("1" if g == "1" else "0"):
        sys.exit("%s on gpu %s: DONE jobs '%s', gpu_shared '%s' (expected 3, %s)" % (r, g, done.get("jobs"),
                 done.get("gpu_shared"), "1" if g == "1" else "0"))
    cell = re.search(r"^\| %s \| (?:[^|]*\|){5} ([^|]*) \|" % r, table, re.M).group(1)
    # on GPU 1 the stranger's process; elsewhere a speed, or n/a for a machine busy with other work
    if (g == "1") != (cell == "n/a (GPU shared with another process)") or (g != "1" and "other load" not in cell):
        sys.exit("%s on gpu %s: tokens/s cell '%s'" % (r, g, cell))
    spans.setdefault(g, []).append((float(done["start"]), float(done["end"]), r))
for g, s in spans.items():
    s.sort()
    if any(a[1] > b[0] for a, b in zip(s, s[1:])):
        sys.exit("gpu %s held two runs at once: %s" % (g, s))
first3 = [x for s in spans.values() for x in s if x[2] != "r3"]
if max(a for a, _, _ in first3) >= min(b for _, b, _ in first3):
    sys.exit("r0-r2 did not train at the same time: %s" % first3)
print("r3 on gpu %s after it freed; %s" % (events[i][2], ", ".join("gpu %s: %s" % (g, "+".join(x[2] for x in s))
                                                                 for g, s in sorted(spans.items()))))
EOF
); then
  pass "gpus_schedule: 4 runs on 3 fake GPUs, one per GPU at a time, each log and DONE naming its GPU, gpu 1's marked shared and its tokens/s n/a ($msg)"
else
  fail "gpus_schedule: $msg"
fi

# Ctrl-C: SIGINT to the runner's whole process group, as a terminal sends it (the runner in a session
# of its own here, so that the test is not in that group). The trainers run in their own sessions, so
# the runner alone gets it; it sends each running trainer one SIGTERM, and each ends its step, writes
# a checkpoint (which the next make ablate resumes with -y 1) and exits; the runner says so and exits
# 130 (128 + SIGINT), leaving no trainer behind. (A trainer in the runner's group would get the SIGINT too, then the
# SIGTERM: a second signal, which kills it before its checkpoint.)
sed 's/^tokens = .*/tokens = 100000 * 128/' "$tmp/gpus.txt" | grep -v '^r3 ' >"$tmp/ctrlc.txt"
setsid env --default-signal=INT "${fake_env[@]}" bash dev/ablate/ablate.sh "$tmp/ctrlc.txt" "$tmp/ctrlc" >"$tmp/ctrlc.log" 2>&1 &
runner=$!
for _ in $(seq 300); do # until the three runs have trained a step or two
  n=0
  for r in r0 r1 r2; do grep -q '^step 2/' "$tmp/ctrlc/$r/stdout.log" 2>/dev/null && n=$((n + 1)); done
  [ $n = 3 ] && break
  sleep 0.1
done
kill -INT -- -$runner
timeout 60 tail --pid=$runner -f /dev/null
wait $runner
rc=$?
msg=""
for r in r0 r1 r2; do
  at=$(sed -n 's/^stopped by SIGTERM at step \([0-9]*\): checkpoint .*/\1/p' "$tmp/ctrlc/$r/stdout.log")
  [ -n "$at" ] && [ -f "$tmp/ctrlc/$r/state_$(printf %08d "$at").bin" ] || msg+="$r: no stop checkpoint; "
done
left=$(pgrep -f "$tmp/ctrlc/" | wc -l)
if [ $rc = 130 ] && [ -z "$msg" ] && [ "$left" = 0 ] &&
   grep -q "^ablate: interrupted during runs 'r0', 'r1', 'r2' (make ablate again resumes from the checkpoints they wrote as they stopped)$" "$tmp/ctrlc.log"; then
  pass "ctrl_c: SIGINT to the runner with 3 runs training: each trainer got one SIGTERM and wrote its stop checkpoint, the runner exited 130, no trainer left"
else
  fail "ctrl_c: exit $rc, ${msg}$left trainers left: $(grep '^ablate: \(interrupted\|run\)' "$tmp/ctrlc.log" | tail -n 2 | paste -sd' ' -)"
fi
pkill -9 -f "$tmp/ctrlc/" 2>/dev/null

# Every other way a job ends (issue 57): SIGTERM and SIGHUP to the runner (a job scheduler, a closed
# ssh session), SIGKILL to the runner; SIGTERM to the make that started it (make passes it on), SIGHUP
# to make's process group (a terminal's hangup reaches the whole foreground job; make itself passes on
# only SIGTERM, and waits for its children after the others), and SIGKILL to make (the runner then
# gets the SIGHUP that the Makefile's setpriv asks for at make's death). Two
# runs of 400 steps, one at a time: 'a' has finished and 'b' is training when the signal comes. After
# each: the runner (or make) exited 128 + the signal, 'b' wrote its stop checkpoint (after SIGKILL too:
# its parent-death SIGTERM), 'a' is intact (DONE, its model unchanged), and no process of the job is
# left. Then make ablate again finishes the killed job and the hung-up one: 'b''s final
# model is bit for bit that of a job never interrupted.
start=$SECONDS
sed -e 's/^tokens = .*/tokens = 400 * 128/' -e 's/^eval_every = .*/eval_every = 200/' -e '/^checkpoint_every/d' \
    -e 's/^standard standard$/a standard\nb standard/' "$tmp/restart.txt" >"$tmp/sig.txt"
final=model_00000400.bin
# one case: start the job, signal it once 'b' trains, check; its verdict (a PASS or FAIL line) into $o.result
signal_case() { # SIG:to
  local c=$1 sig=${1%%:*} to=${1#*:} o=$tmp/sig_${1/:/_} pid rc left at sum_a want
  if [ "$to" != runner ]; then # make in a process group of its own; the signals at their defaults, as in a terminal
    setsid env --default-signal=HUP,INT,TERM ABLATE_DEVICE=cpu make -s --no-print-directory ablate CONFIG="$tmp/sig.txt" OUT="$o" >"$o.log" 2>&1 &
  else
    env --default-signal=HUP,INT,TERM ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/sig.txt" "$o" >"$o.log" 2>&1 &
  fi
  pid=$!
  for _ in $(seq 1200); do grep -q '^step [2-9]/' "$o/b/stdout.log" 2>/dev/null && break; sleep 0.05; done
  sum_a=$(md5sum <"$o/a/$final" 2>/dev/null)
  if [ "$to" = make_group ]; then kill -$sig -- -$pid; else kill -$sig $pid; fi
  wait $pid 2>/dev/null # (quietly: bash would note the signal)
  rc=$?
  for _ in $(seq 300); do pgrep -f "$o/" >/dev/null || break; sleep 0.1; done # a trainer's stop takes a step
  left=$(pgrep -f "$o/" | wc -l)
  at=$(sed -n 's/^stopped by SIGTERM at step \([0-9]*\): checkpoint .*/\1/p' "$o/b/stdout.log")
  want=$((128 + $(kill -l "$sig")))
  if [ $rc = $want ] && [ "$left" = 0 ] && [ -n "$at" ] && [ -f "$o/b/state_$(printf %08d "$at").bin" ] && [ ! -f "$o/b/DONE" ] &&
     [ -f "$o/a/DONE" ] && [ -n "$sum_a" ] && [ "$(md5sum <"$o/a/$final")" = "$sum_a" ] &&
     { [ "$c" = KILL:runner ] || grep -q "^ablate: interrupted during run 'b' (make ablate again resumes" "$o.log"; }; then
    echo "PASS signal_${sig,,}_$to: SIG$sig to the ${to/_/\'s } with run 'b' training: exit $rc, 'b' stopped with a checkpoint at step $at, 'a' intact, nothing left running"
  else
    echo "FAIL signal_${sig,,}_$to: exit $rc (expected $want), $left processes left, 'b' stopped at step '${at}', a's DONE $( [ -f "$o/a/DONE" ] && echo present || echo missing): $(grep '^ablate: \(interrupted\|run\)' "$o.log" | tail -n 2 | paste -sd' ' -)"
  fi >"$o.result"
  pkill -9 -f "$o/" 2>/dev/null
}
# the uninterrupted job and three cases at a time (the jobs wait more than they compute)
ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/sig.txt" "$tmp/sig_ref" >"$tmp/sig_ref.log" 2>&1 &
ref=$!
cases=(TERM:runner HUP:runner KILL:runner TERM:make HUP:make_group KILL:make)
for wave in 0 3; do
  for c in "${cases[@]:$wave:3}"; do signal_case "$c" & done
  wait $(jobs -p | grep -vx "$ref")
done
wait $ref || fail "signals: the uninterrupted job failed: $(grep -m1 'error\|failed' "$tmp/sig_ref.log")"
for c in "${cases[@]}"; do verdict_of "$tmp/sig_${c/:/_}.result"; done
resume_case() { # OUT: make ablate again finishes it; its verdict into $o.result
  local o=$1 rc
  ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/sig.txt" "$o" >"$o.resume.log" 2>&1
  rc=$?
  if [ $rc = 0 ] && [ -f "$o/b/DONE" ] && cmp -s "$o/b/$final" "$tmp/sig_ref/b/$final" && cmp -s "$o/a/$final" "$tmp/sig_ref/a/$final" &&
     grep -q "^ablate: run b (standard) on the CPU: .* (-y 1)$" "$o.resume.log"; then
    echo "PASS signal_resume_${o##*/sig_}: make ablate again resumed 'b' (-y 1) and its final model is bit for bit the uninterrupted job's"
  else
    echo "FAIL signal_resume_${o##*/sig_}: exit $rc, b's DONE $( [ -f "$o/b/DONE" ] && echo present || echo missing), final models $(cmp "$o/b/$final" "$tmp/sig_ref/b/$final" 2>&1 | head -c 120)"
  fi >"$o.result"
}
resume_case "$tmp/sig_KILL_runner" & resume_case "$tmp/sig_HUP_make_group" & wait
verdict_of "$tmp/sig_KILL_runner.result"
verdict_of "$tmp/sig_HUP_make_group.result"
echo "ablate: the signal checks took $((SECONDS - start)) s"

# which GPUs, and how many at a time: plan-only, the fake GPUs; then the refusals, one line each
where() { sed -n 's/^ablate: where: //p' <<<"$1"; }
o1=$("${fake_env[@]}" ABLATE_PLAN_ONLY=1 ABLATE_JOBS=2 bash dev/ablate/ablate.sh "$tmp/gpus.txt" "$tmp/gpus_plan" 2>&1)
o2=$("${fake_env[@]}" ABLATE_PLAN_ONLY=1 CUDA_VISIBLE_DEVICES=2,0 bash dev/ablate/ablate.sh "$tmp/gpus.txt" "$tmp/gpus_plan" 2>&1)
o3=$("${fake_env[@]}" ABLATE_PLAN_ONLY=1 CUDA_VISIBLE_DEVICES=GPU-fake-1 bash dev/ablate/ablate.sh "$tmp/gpus.txt" "$tmp/gpus_plan" 2>&1)
if [ "$(where "$o1")" = "2 runs at a time, one per GPU: gpu 0 (Fake GPU 0, GPU-fake-0), gpu 1 (Fake GPU 1, GPU-fake-1); the CPU trainer, one thread each (ABLATE_TEST_FAKE_GPUS=1)" ] &&
   [ "$(where "$o2")" = "2 runs at a time, one per GPU: gpu 2 (Fake GPU 2, GPU-fake-2), gpu 0 (Fake GPU 0, GPU-fake-0); the CPU trainer, one thread each (ABLATE_TEST_FAKE_GPUS=1)" ] &&
   [ "$(where "$o3")" = "1 run at a time, one per GPU: gpu GPU-fake-1 (Fake GPU 1, GPU-fake-1); the CPU trainer, one thread each (ABLATE_TEST_FAKE_GPUS=1)" ] &&
   [ ! -e "$tmp/gpus_plan" ]; then
  pass "gpus_chosen: ABLATE_JOBS=2 -> gpus 0 1; CUDA_VISIBLE_DEVICES=2,0 -> gpus 2 0 in that order; =GPU-fake-1 -> that GPU alone"
else
  fail "gpus_chosen: '$(where "$o1")' / '$(where "$o2")' / '$(where "$o3")' $(grep -h error <<<"$o1$o2$o3" | head -n 2)"
fi
while IFS='|' read -r name vars want; do
  [ -n "$name" ] || continue
  read -ra assign <<<"$vars"
  "${fake_env[@]}" "${assign[@]}" ABLATE_PLAN_ONLY=1 bash dev/ablate/ablate.sh "$tmp/gpus.txt" "$tmp/gpus_plan" >"$tmp/gj.out" 2>"$tmp/gj.err"
  rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/gj.err")" = 1 ] && grep -Eq "^ablate: $want\$" "$tmp/gj.err" && [ ! -e "$tmp/gpus_plan" ]; then
    pass "gpus_refused_$name: '$(cat "$tmp/gj.err")'"
  else
    fail "gpus_refused_$name: exit $rc, '$(head -c 300 "$tmp/gj.err")' (expected one line matching '$want')"
  fi
done <<'EOF2'
jobs_over_gpus|ABLATE_JOBS=4|ABLATE_JOBS=4: 3 GPUs visible \(0,1,2\), and a run has a GPU to itself \(HINT: ABLATE_JOBS=3 or fewer\)
jobs_0|ABLATE_JOBS=0|ABLATE_JOBS=0: out of range \(expected 1 to 4096, runs at a time\) \(1 trains one run after another\)
jobs_word|ABLATE_JOBS=all|ABLATE_JOBS=all: expected a decimal whole number .*
visible_unknown|CUDA_VISIBLE_DEVICES=5|CUDA_VISIBLE_DEVICES=5: '5' is none of the GPUs nvidia-smi -L lists \(0 GPU-fake-0, 1 GPU-fake-1, 2 GPU-fake-2\) \(HINT: .*\)
visible_twice|CUDA_VISIBLE_DEVICES=0,GPU-fake-0|CUDA_VISIBLE_DEVICES=0,GPU-fake-0: '0' and 'GPU-fake-0' name the same GPU: one run per GPU at a time
fake_and_gpu|ABLATE_DEVICE=gpu|ABLATE_TEST_FAKE_GPUS=1 trains on the CPU trainer, ABLATE_DEVICE=gpu asks for the CUDA one: expected one
status_0|ABLATE_STATUS_S=0|ABLATE_STATUS_S=0: out of range .*
EOF2

# the CPU: one run on every core unless each run can have CPU_CORES_PER_JOB (8) cores; ABLATE_JOBS=N
# pins N runs to N equal groups of cores, each with OMP_NUM_THREADS the group's size. Two runs trained
# that way: each on its own core(s), at the same time, with as many threads as cores.
cores=$(nproc)
o=$(env -u CUDA_VISIBLE_DEVICES ABLATE_PLAN_ONLY=1 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/gpus.txt" "$tmp/gpus_plan" 2>&1)
jobs=$((cores / 8)); [ $jobs -gt 4 ] && jobs=4 # the config's 4 runs
if [ $jobs -le 1 ]; then
  want="1 run at a time, on every core ($cores; CPU runs go in parallel when each can have 8 cores of its own, ABLATE_JOBS=N sets how many)"
else
  want="$jobs runs at a time, each pinned to $((cores / jobs)) cores of its own (OMP_NUM_THREADS=$((cores / jobs))): "
fi
if [ "$(where "$o")" = "$want" ] || { [ $jobs -gt 1 ] && [[ "$(where "$o")" == "$want"* ]]; }; then
  pass "cpu_default_jobs: $cores cores: '$(where "$o")'"
else
  fail "cpu_default_jobs: $cores cores: '$(where "$o")', expected '$want'"
fi
if [ "$cores" -ge 2 ]; then
  sed '/^r[23] standard$/d' "$tmp/gpus.txt" >"$tmp/cpus.txt"
  each=$((cores / 2))
  env -u CUDA_VISIBLE_DEVICES ABLATE_JOBS=2 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/cpus.txt" "$tmp/cpus" >"$tmp/cpus.log" 2>&1
  rc=$?
  d0=$(sed -n 's/^device //p' "$tmp/cpus/r0/DONE" 2>/dev/null); d1=$(sed -n 's/^device //p' "$tmp/cpus/r1/DONE" 2>/dev/null)
  s0=$(sed -n 's/^start //p' "$tmp/cpus/r0/DONE" 2>/dev/null); e0=$(sed -n 's/^end //p' "$tmp/cpus/r0/DONE" 2>/dev/null)
  s1=$(sed -n 's/^start //p' "$tmp/cpus/r1/DONE" 2>/dev/null); e1=$(sed -n 's/^end //p' "$tmp/cpus/r1/DONE" 2>/dev/null)
  if [ $rc -eq 0 ] && [[ "$d0" =~ ^cores?\ [0-9,-]+$ ]] && [[ "$d1" =~ ^cores?\ [0-9,-]+$ ]] && [ "$d0" != "$d1" ] &&
     grep -q "^cores $each$" "$tmp/cpus/r0/DONE" && grep -q "^# on $d1, OMP_NUM_THREADS=$each$" "$tmp/cpus/r1/stdout.log" &&
     grep -q "^device: CPU, $each OpenMP threads" "$tmp/cpus/r0/stdout.log" && awk -v a="$s0" -v b="$e0" -v c="$s1" -v d="$e1" 'BEGIN { exit !(a < d && c < b) }'; then
    pass "cpu_jobs_pinned: ABLATE_JOBS=2 on $cores cores: r0 on $d0, r1 on $d1, $each thread(s) each, trained at the same time"
  else
    fail "cpu_jobs_pinned: exit $rc, r0 '$d0' ($s0-$e0), r1 '$d1' ($s1-$e1): $(grep -m1 'error\|exited' "$tmp/cpus.log")"
  fi
  "${fake_env[@]}" ABLATE_JOBS=$((cores + 1)) ABLATE_PLAN_ONLY=1 ABLATE_TEST_FAKE_GPUS=0 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/gpus.txt" "$tmp/gpus_plan" >/dev/null 2>"$tmp/gj.err"
  if grep -q "^ablate: ABLATE_JOBS=$((cores + 1)): this process may use $cores cores, and a CPU run needs one at least (HINT: ABLATE_JOBS=$cores or fewer)$" "$tmp/gj.err"; then
    pass "cpu_jobs_over_cores: '$(cat "$tmp/gj.err")'"
  else
    fail "cpu_jobs_over_cores: '$(head -c 300 "$tmp/gj.err")'"
  fi
fi
echo "ablate: the runs over GPUs and cores took $((SECONDS - start)) s"

# ---------------------------------------------------------------- the 2-hour limit and FORCE=1
# the fixture config with 2 billion steps and a second run of another shape (its learning rate):
# estimated far over 2 hours after timing the first shape, so the second is not timed. Plan-only with
# the estimate (ABLATE_ESTIMATE=1) and a real make ablate refuse it in one line naming FORCE=1, training
# and creating nothing; FORCE=1 through the Makefile times both shapes and accepts the plan; plan-only
# alone skips the estimate.
sed 's/^tokens = .*/tokens = 2000000000 * 128/; $a second standard -l 2e-3' "$tmp/restart.txt" >"$tmp/huge.txt"
refusal='^ablate: plan: estimated at least [0-9.]+ (h|days) on this machine, over the 2-hour limit: nothing trained \(HINT: make ablate CONFIG=.* FORCE=1 runs it anyway; .*\)$'
for mode in plan real; do
  rm -rf "$tmp/huge_out"
  if [ $mode = plan ]; then
    ABLATE_PLAN_ONLY=1 ABLATE_ESTIMATE=1 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/huge.txt" "$tmp/huge_out" >"$tmp/huge.out" 2>"$tmp/huge.err"
  else
    ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/huge.txt" "$tmp/huge_out" >"$tmp/huge.out" 2>"$tmp/huge.err"
  fi
  rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/huge.err")" = 1 ] && grep -Eq "$refusal" "$tmp/huge.err" &&
     grep -Eq '^ablate: plan: 2 runs \(2 runs x 1 seed\) x 2000000000 steps; estimated at least [0-9.]+ (h|days) on this machine \(calibrated: 2 steps of 1 of the 2 shapes, .*; the others not timed: over the limit already\)$' "$tmp/huge.out" && [ ! -e "$tmp/huge_out" ]; then
    pass "force_refusal_$mode: exit $rc, nothing created, '$(cat "$tmp/huge.err")'"
  else
    fail "force_refusal_$mode: exit $rc, stderr '$(head -c 300 "$tmp/huge.err")', plan line '$(grep '^ablate: plan' "$tmp/huge.out")', OUT $( [ -e "$tmp/huge_out" ] && echo left || echo absent)"
  fi
done
if ABLATE_PLAN_ONLY=1 ABLATE_ESTIMATE=1 ABLATE_DEVICE=cpu make -s --no-print-directory ablate CONFIG="$tmp/huge.txt" OUT="$tmp/huge_out" FORCE=1 >"$tmp/huge.out" 2>"$tmp/huge.err" &&
   grep -Eq '^ablate: plan: 2 runs .* estimated [0-9.]+ (h|days) on this machine \(calibrated: 2 steps of each of 2 shapes, ' "$tmp/huge.out" && [ ! -s "$tmp/huge.err" ]; then
  pass "force_accepts: make ablate ... FORCE=1 (plan-only) accepts the plan: '$(grep '^ablate: plan' "$tmp/huge.out")'"
else
  fail "force_accepts: stderr '$(head -c 300 "$tmp/huge.err")'"
fi
if ABLATE_PLAN_ONLY=1 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/huge.txt" "$tmp/huge_out" >"$tmp/huge.out" 2>&1 &&
   grep -q '^ablate: plan: 2 runs (2 runs x 1 seed) x 2000000000 steps; time estimate skipped' "$tmp/huge.out" &&
   FORCE=yes ABLATE_PLAN_ONLY=1 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/huge.txt" "$tmp/huge_out" 2>&1 | grep -q '^ablate: FORCE=yes: expected 1'; then
  pass "estimate_skipped_in_plan_only: plan-only without ABLATE_ESTIMATE=1 says the estimate was skipped; FORCE=yes is refused"
else
  fail "estimate_skipped_in_plan_only: $(grep '^ablate: plan' "$tmp/huge.out")"
fi

# ---------------------------------------------------------------- bad input (issue 27, round 3)
# The one-run config above with one line changed (or a bad CONFIG/OUT). Each case runs twice, with
# ABLATE_PLAN_ONLY=1 and as a real `make ablate`; each must exit 1 with ONE line on stderr naming the
# config line (CONFIG:LINE:), the file or the flag, nothing on stdout, and nothing trained or written:
# OUT is not left behind (a real run creates OUT, checks every run's command with --check_args 1 and
# removes the OUT it made when a check fails) and no main.log exists. Columns: name | sed on the config |
# expected stderr, an ERE after "ablate: <config>:" (the line number included).
start=$SECONDS
base=$tmp/restart.txt # 1 train, 2 val, 3 seed, 4 tokens, 5 eval_every, 6 checkpoint_every, 7 flags, 8 the run
bad_input() { # NAME CONFIG OUT REGEX (the whole stderr line): both modes
  local name=$1 cfg=$2 o=$3 want=$4 mode rc errs
  for mode in plan real; do
    rm -rf "$tmp/bi.out" "$tmp/bi.err"
    if [ $mode = plan ]; then
      ABLATE_PLAN_ONLY=1 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$cfg" "$o" >"$tmp/bi.out" 2>"$tmp/bi.err"
    else
      ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$cfg" "$o" >"$tmp/bi.out" 2>"$tmp/bi.err"
    fi
    rc=$?
    errs=$(wc -l <"$tmp/bi.err")
    if [ $rc -eq 1 ] && [ "$errs" = 1 ] && [ ! -s "$tmp/bi.out" ] && grep -Eq "^ablate: $want\$" "$tmp/bi.err" &&
       [ -z "$(find "$o" -name main.log 2>/dev/null)" ] && { [ -n "${KEEP_OUT:-}" ] || [ ! -e "$o" ]; }; then
      pass "bad_input_${name}_$mode: exit 1, nothing trained or created, '$(cat "$tmp/bi.err")'"
    else
      fail "bad_input_${name}_$mode: exit $rc, $errs stderr lines '$(head -c 400 "$tmp/bi.err")', stdout '$(head -c 200 "$tmp/bi.out")', OUT $( [ -e "$o" ] && echo "left: $(find "$o" | head -n 5 | paste -sd' ' -)" || echo absent) (expected one line matching '$want')"
    fi
  done
}
c=$tmp/bi.txt
while IFS='|' read -r name edit want; do
  [ -n "$name" ] || continue
  sed "$edit" "$base" >"$c"
  bad_input "$name" "$c" "$tmp/bi_out" "$c:$want"
done <<'EOF2'
tokens_0|s/^tokens = .*/tokens = 0/|4: tokens = 0: expected > 0 training tokens per run
tokens_0_product|s/^tokens = .*/tokens = 0 * 128/|4: tokens = 0 \* 128: expected > 0 training tokens per run
seed_010|s/^seed = .*/seed = 010/|3: seed = 010: a leading zero: numbers are decimal .*\(10, not 010; it is not read as octal\)
seed_08|s/^seed = .*/seed = 08/|3: seed = 08: a leading zero: numbers are decimal .*\(8, not 08; it is not read as octal\)
seed_huge|s/^seed = .*/seed = 99999999999999999999/|3: seed = 99999999999999999999: out of range \(expected 0 to 9223372036854775807, the trainer's --seed\)
seed_2p63|s/^seed = .*/seed = 9223372036854775808/|3: seed = 9223372036854775808: out of range \(expected 0 to 9223372036854775807, the trainer's --seed\)
seed_negative|s/^seed = .*/seed = -1/|3: seed = -1: expected a decimal whole number \(digits only, 0 to 9223372036854775807\)
seeds_twice|s/^seed = .*/seeds = 5 6 5/|3: seeds = 5 6 5: 5 is given twice \(each seed trains every run once\)
seeds_octal|s/^seed = .*/seeds = 1 07/|3: seeds = 1 07: 07: a leading zero: .*\(7, not 07; it is not read as octal\)
seeds_empty|s/^seed = .*/seeds =/|3: seeds = : expected one or more seeds, e.g. seeds = 1337 1338 1339
seed_and_seeds|3a seeds = 1 2|4: seed = and seeds = both given \(first on line 3\): expected one of the two .*
tokens_huge|s/^tokens = .*/tokens = 99999999999999999999/|4: tokens = 99999999999999999999: 781249999999999999 steps of 128 tokens for run 'standard'; the trainer's -x takes at most 2147483646 \(expected at most 274877906688 tokens\)
tokens_huger|s/^tokens = .*/tokens = 99999999999 * 99999999999/|4: tokens = 99999999999 \* 99999999999: = 9999999999800000000001, out of range \(expected 1 to 2361183239235799351296, .*\)
tokens_lots|s/^tokens = .*/tokens = lots/|4: tokens = lots: expected a decimal whole number or a product such as 480 \* 65536 .*
tokens_octal_factor|s/^tokens = .*/tokens = 010 * 128/|4: tokens = 010 \* 128: a leading zero in 010: .*not read as octal\)
tokens_not_multiple|s/^tokens = .*/tokens = 1000/|8: run 'standard': tokens = 1000 is not a multiple of its 128 tokens per step \(-d, or -b x -t\).*
eval_every_0|s/^eval_every = .*/eval_every = 0/|5: eval_every = 0: out of range \(expected 1 to 2147483647, the trainer's -v.*\)
checkpoint_every_hex|s/^checkpoint_every = .*/checkpoint_every = 0x10/|6: checkpoint_every = 0x10: expected a decimal whole number \(digits only, 1 to 2147483647\)
flag_b_octal|s/ -b 4 / -b 04 /|7: run 'standard': -b 04: a leading zero: .*\(4, not 04; it is not read as octal\)
flag_generate|s/^standard standard$/standard standard --generate 5/|8: --generate 5: not a flag of a make ablate run: it makes the trainer sample instead of train
flag_pn|s/^standard standard$/standard standard -pn 2/|8: -pn 2: not a flag of a make ablate run: it makes a run of several processes; a make ablate run is one process, and the runs go one per GPU
name_runs_csv|s/^standard standard$/runs.csv standard/|8: run name 'runs.csv' is a file the runner writes into OUT .*
name_plan_tsv|s/^standard standard$/plan.tsv standard/|8: run name 'plan.tsv' is a file the runner writes into OUT .*
name_loss_png|s/^standard standard$/loss.png standard/|8: run name 'loss.png' is a file the runner writes into OUT .*
name_table_md|s/^standard standard$/table.md standard/|8: run name 'table.md' is a file the runner writes into OUT .*
name_build_log|s/^standard standard$/build_standard.log standard/|8: run name 'build_standard.log' is a file the runner writes into OUT .*
second_run_l_nan|$a second standard -l nan|9: run 'second': the trainer refuses the command \(./build/train_gpt2_cpu_standard --check_args 1\): -l nan: expected a finite number .*
shared_model_missing|s#-e dev/fixtures/standard_tiny_model.bin#-e dev/fixtures/no_such_model.bin#|7: run 'standard': the trainer refuses the command \(.*\): dev/fixtures/no_such_model.bin: cannot open model file .*
EOF2
# CONFIG and OUT: a folder as CONFIG; OUT the config itself, a symlink to it, a data shard; a file
# the runner writes in OUT that is the config (a symlink); a folder where the runner writes runs.csv
mkdir -p "$tmp/cfgdir"
bad_input config_is_folder "$tmp/cfgdir" "$tmp/bi_out" "CONFIG=$tmp/cfgdir: is a folder, expected a config file .*"
cp "$base" "$tmp/bi_self.txt"
KEEP_OUT=1 bad_input out_is_config "$tmp/bi_self.txt" "$tmp/bi_self.txt" "OUT=$tmp/bi_self.txt is the config file \(CONFIG=$tmp/bi_self.txt\): the results would overwrite it .*"
ln -sf bi_self.txt "$tmp/bi_link"
KEEP_OUT=1 bad_input out_is_symlink_to_config "$tmp/bi_self.txt" "$tmp/bi_link" "OUT=$tmp/bi_link is the config file \(CONFIG=$tmp/bi_self.txt\): .*"
KEEP_OUT=1 bad_input out_is_data_shard "$tmp/bi_self.txt" "$tmp/synth_train_000.bin" "OUT=$tmp/synth_train_000.bin is a data shard \($tmp/synth_train_000.bin, train\): .*"
mkdir -p "$tmp/bi_plan" && ln -sf "$tmp/bi_self.txt" "$tmp/bi_plan/plan.tsv"
KEEP_OUT=1 bad_input plan_tsv_is_config "$tmp/bi_self.txt" "$tmp/bi_plan" "OUT=$tmp/bi_plan: $tmp/bi_plan/plan.tsv is the config file \(CONFIG=$tmp/bi_self.txt\): the runner writes or deletes plan.tsv .*"
mkdir -p "$tmp/bi_dir/runs.csv"
KEEP_OUT=1 bad_input runs_csv_is_folder "$tmp/bi_self.txt" "$tmp/bi_dir" "OUT=$tmp/bi_dir: $tmp/bi_dir/runs.csv exists and is not a file \(a folder\?\), where the runner writes runs.csv .*"
bad_input out_under_a_file "$tmp/bi_self.txt" "$tmp/bi_self.txt/sub" "OUT=$tmp/bi_self.txt/sub: cannot be created: $tmp/bi_self.txt is not a folder"
sed '$a second standard -l nan' "$base" >"$tmp/bi_nan.txt"
mkdir -p "$tmp/bi_keep"
KEEP_OUT=1 bad_input second_run_l_nan_into_existing_out "$tmp/bi_nan.txt" "$tmp/bi_keep" "$tmp/bi_nan.txt:9: run 'second': the trainer refuses the command .*-l nan: expected a finite number .*"
if [ -z "$(find "$tmp/bi_keep" -name main.log -o -name plan.tsv -o -name cmd.txt)" ]; then
  pass "bad_input_existing_out_untouched: no main.log, plan.tsv or cmd.txt in the existing OUT after the refusal"
else
  fail "bad_input_existing_out_untouched: $(find "$tmp/bi_keep" | paste -sd' ' -)"
fi
if cmp -s "$base" "$tmp/bi_self.txt" && [ -L "$tmp/bi_plan/plan.tsv" ] && [ "$(ls -A "$tmp/bi_plan")" = plan.tsv ] && [ -d "$tmp/bi_dir/runs.csv" ]; then
  pass "bad_input_nothing_lost: the config, the symlink plan.tsv and the folder runs.csv are as they were"
else
  fail "bad_input_nothing_lost: the config changed, or $tmp/bi_plan or $tmp/bi_dir holds something new: $(ls -A "$tmp/bi_plan" "$tmp/bi_dir" | paste -sd' ' -)"
fi
# report.py: an output that is an input (runs.csv a symlink to a run's main.log) or a folder is
# refused before anything is written; a good report replaces its files by rename
cp -r "$out" "$tmp/out_rep"
sum=$(md5sum <"$tmp/out_rep/standard/seed_1337/main.log")
rm "$tmp/out_rep/runs.csv" && ln -s standard/seed_1337/main.log "$tmp/out_rep/runs.csv"
"$PY" dev/ablate/report.py "$tmp/out_rep" >"$tmp/rep.out" 2>"$tmp/rep.err"
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/rep.err")" = 1 ] && grep -q "^report: $tmp/out_rep/runs.csv is $tmp/out_rep/standard/seed_1337/main.log, an input of the report" "$tmp/rep.err" &&
   [ "$(md5sum <"$tmp/out_rep/standard/seed_1337/main.log")" = "$sum" ]; then
  pass "report_output_is_input: exit 1, main.log unchanged, '$(cat "$tmp/rep.err")'"
else
  fail "report_output_is_input: exit $rc, '$(head -c 300 "$tmp/rep.err")'"
fi
rm "$tmp/out_rep/runs.csv" "$tmp/out_rep/table.md" && mkdir "$tmp/out_rep/table.md"
"$PY" dev/ablate/report.py "$tmp/out_rep" >"$tmp/rep.out" 2>"$tmp/rep.err"
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/rep.err")" = 1 ] && grep -q "^report: $tmp/out_rep/table.md exists and is not a file" "$tmp/rep.err" && [ ! -e "$tmp/out_rep/runs.csv" ]; then
  pass "report_output_is_folder: exit 1 before writing anything, '$(cat "$tmp/rep.err")'"
else
  fail "report_output_is_folder: exit $rc, '$(head -c 300 "$tmp/rep.err")'"
fi
rmdir "$tmp/out_rep/table.md"
if "$PY" dev/ablate/report.py "$tmp/out_rep" >/dev/null 2>"$tmp/rep.err" && [ -f "$tmp/out_rep/table.md" ] && [ -f "$tmp/out_rep/runs.csv" ] &&
   [ -z "$(find "$tmp/out_rep" -name '.*.tmp*')" ]; then
  pass "report_rewrites: runs.csv, loss.png, table.md written again, no temporary file left"
else
  fail "report_rewrites: $(head -c 300 "$tmp/rep.err") $(find "$tmp/out_rep" -name '.*.tmp*')"
fi
echo "ablate: the bad-input cases took $((SECONDS - start)) s"

# ---------------------------------------------------------------- time limits and carried runs (issue 54)
# A GPU call trains the runs that fit its time and brings back only their small files; the next call,
# on another machine, skips them. (1) Finished runs copied from another OUT (their cmd.txt names that
# OUT) are skipped, not refused; the runs left are predicted from the copied DONE files; with
# ABLATE_TIME_LIMIT=1 none fits: each is "not started", the runner exits 0 and writes a partial table
# ("not yet run" for the seeds missing). (2) The next call without the limit trains exactly those and
# completes the table, the copied runs untouched. (3) A run still training at the limit is stopped
# (SIGTERM: its stop checkpoint), not done; the next call resumes it and finishes.
start=$SECONDS
carry=$tmp/carry
for r in standard kv_shared; do mkdir -p "$carry/$r" && cp -r "$out/$r/seed_1337" "$carry/$r/"; rm -f "$carry/$r/seed_1337"/model_*.bin; done
sum_carried=$(cat "$carry"/{standard,kv_shared}/seed_1337/main.log | md5sum)
ABLATE_DEVICE=cpu ABLATE_TIME_LIMIT=1 bash dev/ablate/ablate.sh dev/ablate/toy.txt "$carry" >"$tmp/carry1.log" 2>&1
rc=$?
n_not=$(grep -c '^ablate: not started: run [a-z_]* seed 133[78], predicted .* left of ABLATE_TIME_LIMIT=1 ' "$tmp/carry1.log")
if [ $rc -eq 0 ] && [ "$(find "$carry" -name DONE | wc -l)" = 2 ] && [ "$n_not" = 4 ] &&
   grep -q '^ablate: plan: 4 runs (3 runs x 2 seeds) of 6 x 16 steps; estimated .*(measured: 2 runs from a finished seed.s DONE; calibrated: 2 steps of each of 1 shape' "$tmp/carry1.log" &&
   grep -q '^| standard (1 of 2 seeds) | standard |' "$carry/table.md" && grep -q '^| q_identity (not yet run) | q_identity |.*| not yet run |' "$carry/table.md" &&
   grep -q '^| kv_shared | [0-9.]* | not yet run |$' "$carry/table.md" &&
   grep -q '^ablate: 2 of 6 runs done (4 not finished within ABLATE_TIME_LIMIT=1); table.md is partial' "$tmp/carry1.log"; then
  pass "time_limit_none_fits: 2 runs carried from another OUT skipped (not refused), 4 not started within ABLATE_TIME_LIMIT=1 (predicted from the carried DONE and a calibration), exit 0, a partial table with 'not yet run'"
else
  fail "time_limit_none_fits: exit $rc, $n_not not started: $(grep -m2 '^ablate: \(plan\|run\|.*refused\|.*another command\)' "$tmp/carry1.log" | paste -sd' ' -) $(grep -m1 '^| standard' "$carry/table.md" 2>/dev/null)"
fi
ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh dev/ablate/toy.txt "$carry" >"$tmp/carry2.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(find "$carry" -name DONE | wc -l)" = 6 ] && [ "$(cat "$carry"/{standard,kv_shared}/seed_1337/main.log | md5sum)" = "$sum_carried" ] &&
   [ "$(grep -c '^ablate: skip [a-z_]* seed 1337: done' "$tmp/carry2.log")" = 2 ] && [ "$(grep -c '^ablate: run [a-z_]* seed 133[78] done in' "$tmp/carry2.log")" = 4 ] &&
   ! grep -q 'not yet run\|of 2 seeds)' "$carry/table.md" && grep -q '^| standard | standard |' "$carry/table.md"; then
  pass "time_limit_next_call: the next call trains the 4 runs left, skips the 2 carried (their logs untouched), and the table is whole"
else
  fail "time_limit_next_call: exit $rc, $(find "$carry" -name DONE | wc -l) DONE: $(grep -m2 '^ablate: \(skip\|run\|.*failed\)' "$tmp/carry2.log" | paste -sd' ' -)"
fi
# (3) one run of 96 steps (seconds on 2 cores), its first seed copied in with a DONE that says 0 s, so
# that the second is predicted to fit and starts; the limit stops it part-way
sed -e 's/^seeds = .*/seeds = 1337 1338/' -e 's/^tokens = .*/tokens = 96 * 256/' -e 's/^eval_every = .*/eval_every = 48/' \
    -e '/^kv_shared\|^q_identity/d' dev/ablate/toy.txt >"$tmp/stop.txt"
mkdir -p "$tmp/stop/standard/seed_1337"
cp "$out/standard/seed_1337"/{main.log,stdout.log,DONE} "$tmp/stop/standard/seed_1337/"
sed -i 's/^seconds .*/seconds 0/' "$tmp/stop/standard/seed_1337/DONE"
ABLATE_DEVICE=cpu ABLATE_TIME_LIMIT=6 bash dev/ablate/ablate.sh "$tmp/stop.txt" "$tmp/stop" >"$tmp/stop1.log" 2>&1
rc=$?
left=$(pgrep -f "train_gpt2_cpu_standard.*$tmp/stop/" | wc -l)
if [ $rc -eq 0 ] && [ ! -f "$tmp/stop/standard/seed_1338/DONE" ] && [ "$left" = 0 ] &&
   grep -q '^ablate: ABLATE_TIME_LIMIT=6 reached: stopping run standard seed 1338 ' "$tmp/stop1.log" &&
   grep -q '^ablate: run standard seed 1338 stopped at the time limit (exit 143; ' "$tmp/stop1.log" &&
   ls "$tmp/stop/standard/seed_1338"/state_*.bin >/dev/null 2>&1; then
  pass "time_limit_stops_a_run: the run still training at ABLATE_TIME_LIMIT=6 got SIGTERM, wrote its stop checkpoint ($(basename "$(ls "$tmp/stop/standard/seed_1338"/state_*.bin | tail -n 1)")), no DONE, exit 0, no trainer left"
else
  fail "time_limit_stops_a_run: exit $rc, $left trainers left: $(grep -m3 '^ablate: \(ABLATE\|run\|not\)' "$tmp/stop1.log" | paste -sd' ' -)"
fi
ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/stop.txt" "$tmp/stop" >"$tmp/stop2.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ -f "$tmp/stop/standard/seed_1338/DONE" ] && grep -q '^ablate: run standard seed 1338 (standard) on .* (-y 1)$' "$tmp/stop2.log" &&
   [ "$(grep -c '^step [0-9]*/96 ' "$tmp/stop/standard/seed_1338/main.log")" -ge 96 ]; then
  pass "time_limit_resume: the next call resumes the stopped run from its checkpoint (-y 1) and finishes it"
else
  fail "time_limit_resume: exit $rc: $(grep -m2 '^ablate: run\|error' "$tmp/stop2.log" | paste -sd' ' -)"
fi
# (4) a run that ends in the scheduler's last tick before the deadline: the deadline's SIGTERM must not
# reap it (Popen.terminate polls first; the scheduler's wait4 then failed with "No child processes" and
# the runner with a traceback, seen once in CI), and its exit 0 makes it done, not stopped
out_race=$("$PY" - <<'EOF' 2>&1
import subprocess, sys, time
sys.path.insert(0, "dev/ablate")
import ablate
class Job:
    pass
j = Job()
j.proc, j.stopped, j.cpu_seen = subprocess.Popen(["true"]), False, 0.0
for _ in range(500):  # until it has exited and is not yet reaped (a zombie)
    with open("/proc/%d/stat" % j.proc.pid) as f:
        if f.read().rsplit(")", 1)[1].split()[0] == "Z":
            break
    time.sleep(0.01)
ablate.stop_at_deadline(j)
try:
    ablate.reap(j, time.time())
except ChildProcessError as e:
    sys.exit("reaped before the scheduler's wait4: %s" % e)
if j.proc.returncode != 0 or ablate.stopped_by_deadline(j):
    sys.exit("exit %s, stopped by the deadline: %s (expected exit 0, done)" % (j.proc.returncode, ablate.stopped_by_deadline(j)))
print("ok")
EOF
)
if [ "$out_race" = ok ]; then
  pass "time_limit_run_ends_at_deadline: a run that exited just before the deadline's SIGTERM is reaped by the scheduler (exit 0) and counted done, not stopped"
else
  fail "time_limit_run_ends_at_deadline: $out_race"
fi
out_bad=$(ABLATE_TIME_LIMIT=0 ABLATE_PLAN_ONLY=1 bash dev/ablate/ablate.sh dev/ablate/toy.txt "$tmp/tl0" 2>&1)
if [ $? -eq 1 ] && grep -q '^ablate: ABLATE_TIME_LIMIT=0: out of range (expected 1 to' <<<"$out_bad"; then
  pass "time_limit_refused: ABLATE_TIME_LIMIT=0 refused in one line"
else
  fail "time_limit_refused: $out_bad"
fi
# max_epochs: a run that would read its training data more than once is refused before anything trains
sed -e 's/^tokens = .*/tokens = 4000 * 256/' -e 's/^eval_every = .*/eval_every = 2000\nmax_epochs = 1/' dev/ablate/toy.txt >"$tmp/epochs.txt"
msg=$(ABLATE_DEVICE=cpu ABLATE_PLAN_ONLY=1 bash dev/ablate/ablate.sh "$tmp/epochs.txt" "$tmp/epochs_out" 2>&1)
rc=$?
tline=$(grep -n '^tokens = ' "$tmp/epochs.txt" | cut -d: -f1)
if [ $rc -eq 1 ] && grep -q "^ablate: $tmp/epochs.txt:$tline: run 'standard': tokens = 4000 \* 256 reads 1.08 epochs of dev/data/austen/austen_train_\*.bin, over max_epochs = 1 (HINT: tokens = 3690 \* 256, 944,640 tokens, is at most 1 epoch)" <<<"$msg" &&
   [ ! -e "$tmp/epochs_out" ]; then
  pass "max_epochs: 1,024,000 tokens of Austen's 944,705 refused with max_epochs = 1 ($(grep -m1 "run 'standard'" <<<"$msg" | sed 's/.*reads/reads/'))"
else
  fail "max_epochs: exit $rc: $(head -n 2 <<<"$msg" | paste -sd' ' -)"
fi
# the README's results table from the runs that came back (dev/ablate/results_table.py): the toy's
# summary.csv standing in for shared_projections' (kv_shared is a run of both), its perplexity change
# recomputed here; the runs without a summary row "not yet run"; a run with a seed missing says so
mkdir -p "$tmp/res/shared_projections"
cp "$carry/summary.csv" "$tmp/res/shared_projections/"
rt=$(ABLATE_RESULTS_DIR="$tmp/res" "$PY" dev/ablate/results_table.py 2>&1)
want=$("$PY" -c '
import csv, math, sys
r = {x["run"]: x for x in csv.DictReader(open(sys.argv[1]))}
print("%+.1f%%" % (100 * (math.exp(float(r["kv_shared"]["diff_vs_baseline"])) - 1)))' "$carry/summary.csv")
sed -i 's/^\(kv_shared,[^,]*,[^,]*,\)2,/\11,/' "$tmp/res/shared_projections/summary.csv"
rt1=$(ABLATE_RESULTS_DIR="$tmp/res" "$PY" dev/ablate/results_table.py 2>&1)
if grep -q "^| shared projections ([^|]*) | kv_shared (Q-K=V) | +3.1% | $(sed 's/[+.]/\\&/g' <<<"$want") ([0-9.]* ± [0-9.]* vs [0-9.]* ± [0-9.]*; p = [0-9.e-]*, 2 seeds) |$" <<<"$rt" &&
   grep -q '^|  | qk_shared (Q=K-V) | +4.9% | not yet run |$' <<<"$rt" && grep -q '^| residual query .* | q_residual | .* | not yet run |$' <<<"$rt" &&
   grep -q '^| shared projections ([^|]*) | kv_shared (Q-K=V) | +3.1% | .*, 1 of 2 seeds) |$' <<<"$rt1"; then
  pass "results_table: a recorded kv_shared as perplexity vs standard ($want, 2 seeds), the runs not recorded 'not yet run', a missing seed said ('1 of 2 seeds')"
else
  fail "results_table: '$want' expected: $(grep 'kv_shared\|qk_shared' <<<"$rt" | paste -sd' ' -) / $(grep 'kv_shared' <<<"$rt1")"
fi
echo "ablate: the time-limit and carry checks took $((SECONDS - start)) s"

echo "ablate: the suite took $((SECONDS - suite_start)) s"
[ $fails -eq 0 ] || { echo "ablate: $fails failed"; exit 1; }
