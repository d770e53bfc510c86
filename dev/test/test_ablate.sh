#!/usr/bin/env bash
# Tests of `make ablate` (dev/ablate/): trains the toy config (three schemes, real CPU training on
# Austen, forced onto the CPU trainer with ABLATE_DEVICE=cpu so that a GPU machine runs the same
# test), then checks runs.csv's columns and rows, loss.png's PNG header and size, table.md against
# build/params and runs.csv, that a second invocation retrains nothing, that every shipped config
# is valid (each run's command checked by its trainer, --check_args 1), that a config error is one
# line and a non-zero exit, the table without a standard run, the restarts (-y 1 / --overwrite 1),
# and the bad input of issue 27 (a table of one-line config changes, a folder as CONFIG, OUT that is
# an input, report.py's outputs that are inputs or folders): each refused in one line naming the
# config line, file or flag, in plan-only and real mode, with nothing trained or written. One
# "PASS ablate ..." / "FAIL ablate ..." line per check; exits 1 if any failed. About 2-4 minutes on 2
# idle cores (the three runs; dev/ablate/toy.txt's `tokens` line sets that); the checks after the
# training take about 10 s and print their time.
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
# ABLATE_PLAN_ONLY: the config, then each run's command checked by its trainer (--check_args 1: no
# training, nothing created); with the CPU trainers, which take the shipped configs' flags (the CUDA
# ones would be nvcc builds). A corpus not prepared here is checked against synthetic shards, which
# the runner must say (the data headers were not checked).
start=$SECONDS
for cfg in dev/ablate/*.txt; do
  data=$(sed -n 's/^data *= *\([a-z]*\).*/\1/p' "$cfg")
  if msg=$(ABLATE_PLAN_ONLY=1 ABLATE_DEVICE=cpu bash dev/ablate/ablate.sh "$cfg" 2>&1); then
    checked=$(grep -c '^ablate: [^ ]* ([a-z_]*, [0-9]* steps x [0-9]* tokens): ./build/train_gpt2_cpu_' <<<"$msg")
    if [ -n "$data" ] && ! compgen -G "dev/data/$data/${data}_train_*.bin" >/dev/null &&
       ! grep -q "^ablate: note: dev/data/$data is not prepared: .*synthetic shard.* NOT checked" <<<"$msg"; then
      fail "config_valid_$(basename "$cfg" .txt): dev/data/$data is not prepared, and the plan does not say that the data headers went unchecked"
    elif grep -q "checked by [a-z]* trainers* (--check_args 1)" <<<"$msg" && [ "$checked" -ge 1 ]; then
      pass "config_valid_$(basename "$cfg" .txt): $(head -n 1 <<<"$msg" | sed 's/^ablate: //')$(grep -q 'NOT checked' <<<"$msg" && echo " (corpus not prepared here: synthetic shards, said so)")"
    else
      fail "config_valid_$(basename "$cfg" .txt): exit 0 but no trainer check reported: $(head -n 2 <<<"$msg" | paste -sd' ' -)"
    fi
  else
    fail "config_valid_$(basename "$cfg" .txt): $(head -n 3 <<<"$msg" | paste -sd' ' -)"
  fi
done
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
tokens_huge|s/^tokens = .*/tokens = 99999999999999999999/|4: tokens = 99999999999999999999: 781249999999999999 steps of 128 tokens for run 'standard'; the trainer's -x takes at most 2147483646 \(expected at most 274877906688 tokens\)
tokens_huger|s/^tokens = .*/tokens = 99999999999 * 99999999999/|4: tokens = 99999999999 \* 99999999999: = 9999999999800000000001, out of range \(expected 1 to 2361183239235799351296, .*\)
tokens_lots|s/^tokens = .*/tokens = lots/|4: tokens = lots: expected a decimal whole number or a product such as 480 \* 65536 .*
tokens_octal_factor|s/^tokens = .*/tokens = 010 * 128/|4: tokens = 010 \* 128: a leading zero in 010: .*not read as octal\)
tokens_not_multiple|s/^tokens = .*/tokens = 1000/|8: run 'standard': tokens = 1000 is not a multiple of its 128 tokens per step \(-d, or -b x -t\).*
eval_every_0|s/^eval_every = .*/eval_every = 0/|5: eval_every = 0: out of range \(expected 1 to 2147483647, the trainer's -v.*\)
checkpoint_every_hex|s/^checkpoint_every = .*/checkpoint_every = 0x10/|6: checkpoint_every = 0x10: expected a decimal whole number \(digits only, 1 to 2147483647\)
flag_b_octal|s/ -b 4 / -b 04 /|7: run 'standard': -b 04: a leading zero: .*\(4, not 04; it is not read as octal\)
flag_generate|s/^standard standard$/standard standard --generate 5/|8: --generate 5: not a flag of a make ablate run: it makes the trainer sample instead of train
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
sum=$(md5sum <"$tmp/out_rep/standard/main.log")
rm "$tmp/out_rep/runs.csv" && ln -s standard/main.log "$tmp/out_rep/runs.csv"
"$PY" dev/ablate/report.py "$tmp/out_rep" >"$tmp/rep.out" 2>"$tmp/rep.err"
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/rep.err")" = 1 ] && grep -q "^report: $tmp/out_rep/runs.csv is $tmp/out_rep/standard/main.log, an input of the report" "$tmp/rep.err" &&
   [ "$(md5sum <"$tmp/out_rep/standard/main.log")" = "$sum" ]; then
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

[ $fails -eq 0 ] || { echo "ablate: $fails failed"; exit 1; }
