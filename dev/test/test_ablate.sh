#!/usr/bin/env bash
# Tests of `make ablate` (dev/ablate/): trains the toy config (three schemes, real CPU training on
# Austen, forced onto the CPU trainer with ABLATE_DEVICE=cpu so that a GPU machine runs the same
# test), then checks runs.csv's columns and rows, loss.png's PNG header and size, table.md against
# build/params and runs.csv, that a second invocation retrains nothing, that every shipped config
# is valid, that a config error is one line and a non-zero exit, and the table without a standard
# run. One "PASS ablate ..." / "FAIL ablate ..." line per check; exits 1 if any failed. About 2-4
# minutes on 2 busy cores (the three runs); dev/ablate/toy.txt's `tokens` line sets that.
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
fails=0
pass() { echo "PASS ablate $*"; }
fail() { echo "FAIL ablate $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d /tmp/test_ablate.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out
RUNS="standard kv_shared q_identity" # the runs of dev/ablate/toy.txt, in its order
PNG_W=1200                           # report.py: 12 x 8 inches at 100 dpi
PNG_H=800

# ---------------------------------------------------------------- the toy ablation, trained
start=$SECONDS
if ABLATE_DEVICE=cpu make -s --no-print-directory ablate CONFIG=dev/ablate/toy.txt OUT="$out" >"$tmp/run1.log" 2>&1; then
  pass "toy_config_trains: make ablate CONFIG=dev/ablate/toy.txt exited 0 in $((SECONDS - start)) s ($(grep -o 'run [a-z_]* done in [0-9]* s' "$tmp/run1.log" | sed 's/^run //' | paste -sd, - | sed 's/,/, /g'))"
else
  fail "toy_config_trains: make ablate exited non-zero after $((SECONDS - start)) s: $(grep -m1 '^ablate:.*\(failed\|exited\|error\)' "$tmp/run1.log" || tail -n 1 "$tmp/run1.log")"
  tail -n 5 "$tmp/run1.log" | sed 's/^/  /'
  echo "ablate: $fails failed"
  exit 1
fi

# ---------------------------------------------------------------- runs.csv
if msg=$("$PY" - "$out/runs.csv" $RUNS <<'EOF'
import csv, math, sys
path, runs = sys.argv[1], sys.argv[2:]
rows = list(csv.reader(open(path)))
want = ["run", "scheme", "kind", "step", "tokens", "loss", "tok_s"]
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
    mine = [r for r in rows if r["run"] == name]
    if any(r["scheme"] != name for r in mine):  # in the toy config each run is named after its scheme
        sys.exit("%s: scheme column is not %s" % (name, name))
    train = [r for r in mine if r["kind"] == "train"]
    val = [r for r in mine if r["kind"] == "val"]
    if len(train) + len(val) != len(mine):
        sys.exit("%s: a kind other than train/val" % name)
    steps = [int(r["step"]) for r in train]
    if steps != list(range(1, len(steps) + 1)) or len(steps) < 2:
        sys.exit("%s: train steps %s..., expected 1, 2, 3, ... (one row per step)" % (name, steps[:5]))
    tps = int(train[0]["tokens"])
    for r in train + val:
        if int(r["tokens"]) != int(r["step"]) * tps or not math.isfinite(float(r["loss"])):
            sys.exit("%s: row %s: tokens is not step x %d, or the loss is not finite" % (name, r, tps))
    if any(float(r["tok_s"]) <= 0 for r in train) or any(r["tok_s"] != "" for r in val):
        sys.exit("%s: tok_s must be > 0 on train rows and empty on val rows" % name)
    if not val or int(val[-1]["step"]) != steps[-1]:
        sys.exit("%s: expected val rows ending at the last step %d" % (name, steps[-1]))
    if not float(train[-1]["loss"]) < float(train[0]["loss"]):
        sys.exit("%s: the train loss did not go down (%s -> %s)" % (name, train[0]["loss"], train[-1]["loss"]))
    summary.append("%s %d train + %d val rows, loss %.2f -> %.2f" % (name, len(train), len(val),
                   float(train[0]["loss"]), float(train[-1]["loss"])))
print("; ".join(summary))
EOF
); then pass "runs_csv: columns run,scheme,kind,step,tokens,loss,tok_s; $msg"; else fail "runs_csv: $msg"; fi

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
  model=$(grep '^model: ' "$out/$run/stdout.log" | tail -n 1)
  read -r L C H Hkv M bias T <<<"$(sed -E 's/.*n_layer=([0-9]+) n_embd=([0-9]+) n_head=([0-9]+) n_kv_head=([0-9]+) mlp=([0-9]+) bias=([0-9]+) tied=1 T=([0-9]+) .*/\1 \2 \3 \4 \5 \6 \7/' <<<"$model")"
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

# final val loss and the columns relative to standard, recomputed from runs.csv
if msg=$("$PY" - "$out" $RUNS <<'EOF'
import csv, math, sys
out, runs = sys.argv[1], sys.argv[2:]
final = {}
for r in csv.DictReader(open(out + "/runs.csv")):
    if r["kind"] == "val":
        final[r["run"]] = float(r["loss"])  # rows are in step order
table = {}
for line in open(out + "/table.md"):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 11 and cells[0] in runs:
        table[cells[0]] = cells
base = final["standard"]
for name in runs:
    c = table.get(name)
    if c is None:
        sys.exit("no row for %s in table.md" % name)
    if abs(float(c[8]) - final[name]) > 6e-5:
        sys.exit("%s: final val loss %s in table.md, %.6f in runs.csv" % (name, c[8], final[name]))
    if name == "standard":
        want = ["baseline", "baseline"]
    else:
        want = ["%+.2f%%" % (100 * (final[name] - base) / base), "%+.2f%%" % (100 * (math.exp(final[name] - base) - 1))]
    if c[9:11] != want:
        sys.exit("%s: relative columns %s, expected %s from runs.csv" % (name, c[9:11], want))
    float(c[6].replace(",", "")), float(c[7].replace(",", ""))  # tokens/s and peak memory are numbers
print(", ".join("%s %s %s" % (n, table[n][8], table[n][9]) for n in runs))
EOF
); then pass "table_losses: final val loss and val loss vs standard match runs.csv ($msg)"; else fail "table_losses: $msg"; fi

# ---------------------------------------------------------------- resumable: nothing is redone
sums=$(cat "$out"/*/main.log | md5sum)
start=$SECONDS
if ABLATE_DEVICE=cpu make -s --no-print-directory ablate CONFIG=dev/ablate/toy.txt OUT="$out" >"$tmp/run2.log" 2>&1; then
  skips=$(grep -c '^ablate: skip ' "$tmp/run2.log")
  trained=$(grep -c '^ablate: run ' "$tmp/run2.log")
  if [ "$skips" = 3 ] && [ "$trained" = 0 ] && [ "$(cat "$out"/*/main.log | md5sum)" = "$sums" ]; then
    pass "second_invocation_skips: 3 runs skipped, none trained, main.log files unchanged, $((SECONDS - start)) s"
  else
    fail "second_invocation_skips: $skips skip lines, $trained runs trained (expected 3 and 0), main.log $( [ "$(cat "$out"/*/main.log | md5sum)" = "$sums" ] && echo unchanged || echo changed)"
  fi
else
  fail "second_invocation_skips: make ablate exited non-zero: $(tail -n 1 "$tmp/run2.log")"
fi

# ---------------------------------------------------------------- every shipped config is valid
# checked as on a GPU machine (ABLATE_PLAN_ONLY: no data, no build, no training)
for cfg in dev/ablate/*.txt; do
  if msg=$(ABLATE_PLAN_ONLY=1 ABLATE_DEVICE=gpu bash dev/ablate/ablate.sh "$cfg" 2>&1); then
    pass "config_valid_$(basename "$cfg" .txt): $(head -n 1 <<<"$msg" | sed 's/^ablate: //')"
  else
    fail "config_valid_$(basename "$cfg" .txt): $(head -n 3 <<<"$msg" | paste -sd' ' -)"
  fi
done

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
   [ "$(grep -c '| n/a | n/a |$' "$tmp/out_nobase/table.md")" = 3 ] && grep -q '^No baseline' "$tmp/out_nobase/table.md"; then
  pass "no_baseline_gives_na: every relative cell n/a and a line saying why"
else
  fail "no_baseline_gives_na: $(head -c 300 "$tmp/nobase.err") $(grep -c 'n/a' "$tmp/out_nobase/table.md" 2>/dev/null) n/a rows"
fi

# ---------------------------------------------------------------- restarts: -y 1 only with a checkpoint
# A one-run config on the tiny fixture (seconds). The trainer refuses -y 1 with nothing to resume and
# a fresh run into a used folder, so the runner must choose: (1) a folder with only the main.log of an
# attempt that died before its first checkpoint starts again with --overwrite 1; (2) a folder with
# checkpoints at steps 2 and 4 of 8 (the plan's command run by hand with -x 4) resumes with -y 1.
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
plan=$(ABLATE_PLAN_ONLY=1 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/restart.txt" "$tmp/restart2" 2>&1 | sed -n 's/^ablate: standard (standard, 8 steps x 128 tokens): //p')
read -ra planned <<<"$plan"
mkdir -p "$tmp/restart2/standard"
if [ ${#planned[@]} -gt 0 ] && "${planned[@]}" -x 4 >"$tmp/restart2_first.log" 2>&1 && [ -f "$tmp/restart2/standard/state_00000004.bin" ]; then
  ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$tmp/restart.txt" "$tmp/restart2" >"$tmp/restart2.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && [ -f "$tmp/restart2/standard/DONE" ] &&
     grep -q "^resuming from $tmp/restart2/standard/state_00000004.bin at step 4" "$tmp/restart2/standard/stdout.log"; then
    pass "restart_from_checkpoint: a folder with checkpoints at steps 2 and 4 resumes from step 4 with -y 1"
  else
    fail "restart_from_checkpoint: exit $rc: $(grep -m1 'error\|resuming' "$tmp/restart2/standard/stdout.log" 2>/dev/null || tail -n 1 "$tmp/restart2.log")"
  fi
else
  fail "restart_from_checkpoint: the plan's command with -x 4 did not write a checkpoint at step 4 (plan: '${plan}': $(tail -n 1 "$tmp/restart2_first.log" 2>/dev/null))"
fi

[ $fails -eq 0 ] || { echo "ablate: $fails failed"; exit 1; }
