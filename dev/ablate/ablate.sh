#!/usr/bin/env bash
# `make ablate CONFIG=dev/ablate/<name>.txt [OUT=dir]`: trains every run of a config on the same
# data, seed and token budget, one after another, then writes runs.csv, loss.png and table.md
# (dev/ablate/report.py) into one folder.
#
#   bash dev/ablate/ablate.sh CONFIG [OUT]      OUT defaults to ablate_<config name>/ at the root
#   ABLATE_DEVICE=cpu|gpu                       force the trainer (default: gpu when nvidia-smi -L
#                                               lists a GPU, else cpu)
#   ABLATE_PLAN_ONLY=1                          check the config, print each run's command, stop
#   ABLATE_RUNS="name ..."                      train only these runs of the config (the others are
#                                               left as they are); the report is written once every
#                                               run of the config is done, so a long config can be
#                                               trained in parts into the same OUT (dev/test/gpu_suite.sh's
#                                               ablate_seed004_a..d: a device call each)
#
# The config (plain text, `#` starts a comment; dev/ablate/README.md has the whole story):
#   key = value lines, the shared block:
#     data = austen|mix          a corpus, prepared by dev/data/prepare_<corpus>.sh if missing
#     (or train = <pattern> and val = <pattern>: token shards of your own)
#     seed = 1337                --seed of every run: the same init, data order and sampling
#     tokens = 500 * 65536       token budget per run (a product is fine); steps = tokens / tokens
#                                per step, which must divide it, so every run sees the same tokens
#     eval_every = 50            validation loss every N steps (-v; the trainer adds the last step)
#     flags = -e d12 -b 16 ...   trainer flags shared by every run
#     checkpoint_every = 250     optional: -n (default: a quarter of the steps)
#     baseline = <run name>      optional: the run table.md compares with (default: the first
#                                run of scheme standard; none: the relative columns are n/a)
#   one run per line:  <name> <scheme> [trainer flags]   (a run's flag replaces the shared one)
# The runner owns -i -j -o -x -v -n -y --overwrite --seed (from the shared block) and passes -s 0 unless the
# config sets -s. -b and -t must be given, so that it can compute the steps.
#
# Output, in OUT: plan.tsv (the runs and their commands), <run>/ with the trainer's main.log, its
# stdout (stdout.log), cmd.txt and, once the trainer exits 0, DONE; then runs.csv, loss.png,
# table.md. A run with DONE is skipped; an unfinished one resumes from its latest checkpoint
# (-n, -y 1), or, when it died before its first checkpoint, starts again (--overwrite 1 replaces
# its main.log). A finished run keeps only its final model_*.bin (state_*.bin and older models go).
# A run whose command changed since it started is refused: delete its folder or use another OUT.
set -euo pipefail

die() { echo "ablate: $*" >&2; exit 1; }
info() { echo "ablate: $*"; }

[ $# -ge 1 ] && [ -n "$1" ] || die "no config (HINT: make ablate CONFIG=dev/ablate/toy.txt [OUT=dir]; configs: $(cd "$(dirname "$0")" && echo *.txt))"
[ -f "$1" ] || die "CONFIG=$1: no such file (HINT: the configs are dev/ablate/*.txt)"
CONFIG_PATH=$(realpath "$1")
CONFIG_NAME=$(basename "$1" .txt)
OUT_ARG=${2:-}
[ -n "$OUT_ARG" ] && OUT_ARG=$(realpath -m "$OUT_ARG")
cd "$(dirname "$0")/../.."
CONFIG_SHOW=$1  # the name errors and the table give
OUT=${OUT_ARG:-$PWD/ablate_$CONFIG_NAME}
PYTHON=${PYTHON:-/usr/bin/python3}
SCHEMES=$(make -s --no-print-directory schemes)

# ---------------------------------------------------------------------------------------------
# 1. read the config: every line is checked and every error printed before anything runs

errors=0
cfg_error() { # LINE MESSAGE
  echo "ablate: $CONFIG_SHOW:$1: $2" >&2
  errors=$((errors + 1))
}

declare -A KEY KEY_LINE
RUNS=()                                  # run names in config order
declare -A RUN_SCHEME RUN_FLAGS RUN_LINE # by name; RUN_FLAGS as one string
KNOWN_KEYS=" data train val seed tokens eval_every flags checkpoint_every baseline "
RUNNER_FLAGS=" -i -j -o -x -v -n -y --overwrite --seed -h "

# FLAGS...: checks that the words are (flag value) pairs; line number in $1
check_flags() {
  local line=$1; shift
  while [ $# -gt 0 ]; do
    local f=$1 v=${2-}
    if ! [[ $f =~ ^(-[a-z]|--[a-z_]+)$ ]]; then
      cfg_error "$line" "'$f' is not a trainer flag (expected -<letter> or --<name>, each followed by its value)"
      return
    fi
    if [ $# -lt 2 ] || [[ $v =~ ^--?[a-z] ]]; then
      cfg_error "$line" "$f has no value (every trainer flag takes one, e.g. $f 1)"
      return
    fi
    if [[ $RUNNER_FLAGS == *" $f "* ]]; then
      cfg_error "$line" "$f is set by the runner (HINT: use the shared keys data/train/val, seed, tokens, eval_every, checkpoint_every)"
    fi
    if [ "$f" = --tied ] && [ "$v" != 1 ]; then
      cfg_error "$line" "--tied $v: table.md's parameter counts come from build/params, which counts tied heads only"
    fi
    shift 2
  done
}

lineno=0
while IFS= read -r raw || [ -n "$raw" ]; do
  lineno=$((lineno + 1))
  line=${raw%%#*}
  line=$(echo "$line" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
  [ -z "$line" ] && continue
  if [[ $line =~ ^([A-Za-z_]+)[[:space:]]*=[[:space:]]*(.*)$ ]]; then
    key=${BASH_REMATCH[1]}
    value=${BASH_REMATCH[2]}
    if [[ $KNOWN_KEYS != *" $key "* ]]; then
      cfg_error $lineno "unknown key '$key' (expected one of:$KNOWN_KEYS)"
    elif [ -n "${KEY[$key]+x}" ]; then
      cfg_error $lineno "$key is set twice (first on line ${KEY_LINE[$key]})"
    else
      KEY[$key]=$value
      KEY_LINE[$key]=$lineno
    fi
    continue
  fi
  read -ra words <<<"$line"
  name=${words[0]}
  scheme=${words[1]:-}
  if ! [[ $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
    cfg_error $lineno "run name '$name': expected letters, digits, '.', '_' or '-' (it names a folder)"
    continue
  fi
  if [ -n "${RUN_LINE[$name]+x}" ]; then
    cfg_error $lineno "run name '$name' is used twice (first on line ${RUN_LINE[$name]})"
    continue
  fi
  if [ -z "$scheme" ]; then
    cfg_error $lineno "run '$name' has no scheme (expected: <name> <scheme> [trainer flags]; schemes: $SCHEMES)"
    continue
  fi
  if [[ " $SCHEMES " != *" $scheme "* ]]; then
    cfg_error $lineno "unknown scheme '$scheme' in run '$name' (HINT: one of $SCHEMES)"
    continue
  fi
  check_flags $lineno "${words[@]:2}"
  RUNS+=("$name")
  RUN_SCHEME[$name]=$scheme
  RUN_FLAGS[$name]=${words[*]:2}
  RUN_LINE[$name]=$lineno
done <"$CONFIG_PATH"

# the shared block
END=$lineno # errors about what is missing point at the end of the file
for key in seed tokens eval_every; do
  [ -n "${KEY[$key]:-}" ] || cfg_error $END "no '$key = ...' line (the shared block needs data, seed, tokens, eval_every)"
done
DATA=${KEY[data]:-}
TRAIN=${KEY[train]:-}
VAL=${KEY[val]:-}
if [ -n "$DATA" ]; then
  if [ -n "$TRAIN$VAL" ]; then
    cfg_error "${KEY_LINE[data]}" "data = $DATA and train/val patterns both given (expected one of the two)"
  elif [ ! -f "dev/data/prepare_$DATA.sh" ]; then
    cfg_error "${KEY_LINE[data]}" "data = $DATA: no dev/data/prepare_$DATA.sh (HINT: austen or mix, or train = / val = patterns)"
  else
    TRAIN="dev/data/$DATA/${DATA}_train_*.bin"
    VAL="dev/data/$DATA/${DATA}_val_*.bin"
  fi
elif [ -z "$TRAIN" ] || [ -z "$VAL" ]; then
  cfg_error $END "no data (expected 'data = austen|mix', or both 'train = <pattern>' and 'val = <pattern>')"
fi
whole_number() { # KEY: a whole number, or a product of whole numbers ("500 * 65536")
  local v=${KEY[$1]:-}
  [ -z "$v" ] && return 0
  if [[ $v =~ ^[0-9]+([[:space:]]*\*[[:space:]]*[0-9]+)*$ ]]; then
    KEY[$1]=$((v))
  else
    cfg_error "${KEY_LINE[$1]}" "$1 = $v: expected a whole number (or a product such as 500 * 65536)"
  fi
}
for key in seed tokens eval_every checkpoint_every; do whole_number $key; done
TOKENS=${KEY[tokens]:-0}
EVAL_EVERY=${KEY[eval_every]:-0}
if [ -n "${KEY[eval_every]:-}" ] && [ "$EVAL_EVERY" -lt 1 ]; then cfg_error "${KEY_LINE[eval_every]}" "eval_every = 0: expected >= 1 (the table needs a validation loss)"; fi
read -ra SHARED <<<"${KEY[flags]:-}"
[ ${#SHARED[@]} -gt 0 ] && check_flags "${KEY_LINE[flags]}" "${SHARED[@]}"
[ ${#RUNS[@]} -gt 0 ] || cfg_error $END "no runs (expected lines '<name> <scheme> [trainer flags]')"

# ABLATE_RUNS: a subset of the runs to train now (every name must be a run of the config)
declare -A SELECTED
if [ -n "${ABLATE_RUNS:-}" ]; then
  for name in $ABLATE_RUNS; do
    if [ -z "${RUN_LINE[$name]+x}" ]; then
      cfg_error $END "ABLATE_RUNS names '$name', which is no run of this config (runs: ${RUNS[*]})"
    fi
    SELECTED[$name]=1
  done
else
  for name in "${RUNS[@]}"; do SELECTED[$name]=1; done
fi

BASELINE=${KEY[baseline]:-}
if [ -n "$BASELINE" ] && [ -z "${RUN_LINE[$BASELINE]+x}" ]; then
  cfg_error "${KEY_LINE[baseline]}" "baseline = $BASELINE: no run of that name"
fi
if [ -z "$BASELINE" ]; then
  for name in "${RUNS[@]}"; do
    if [ "${RUN_SCHEME[$name]}" = standard ]; then BASELINE=$name; break; fi
  done
fi

# the flags of a run: the runner's defaults, then the shared flags, then the run's own; a later
# value of a flag replaces an earlier one. Sets MERGED (an array of flag value pairs).
merged_flags() { # NAME
  local -A val=()
  local order=() f words
  read -ra words <<<"-s 0 ${KEY[flags]:-} ${RUN_FLAGS[$1]}"
  for ((i = 0; i + 1 < ${#words[@]}; i += 2)); do
    f=${words[i]}
    [ -n "${val[$f]+x}" ] || order+=("$f")
    val[$f]=${words[i + 1]}
  done
  MERGED=()
  for f in "${order[@]}"; do MERGED+=("$f" "${val[$f]}"); done
}
flag_value() { # FLAG DEFAULT: its value in MERGED
  local i
  for ((i = 0; i < ${#MERGED[@]}; i += 2)); do
    [ "${MERGED[i]}" = "$1" ] && { echo "${MERGED[i + 1]}"; return; }
  done
  echo "$2"
}

# the model shape of -e dN plus overrides, as build/params takes it ("L C H Hkv M bias"), or
# nothing for a checkpoint file (its shape is in the file). Presets as the trainers' -e.
shape_of() {
  local e L C H
  e=$(flag_value -e d12)
  case $e in
    d2) L=2; C=128; H=2 ;; d4) L=4; C=256; H=4 ;; d6) L=6; C=384; H=6 ;; d12) L=12; C=768; H=12 ;;
    d24) L=24; C=1024; H=16 ;; d36) L=36; C=1280; H=20 ;; d48) L=48; C=1600; H=25 ;;
    *) return 0 ;;
  esac
  L=$(flag_value --n_layer $L); C=$(flag_value --n_embd $C); H=$(flag_value --n_head $H)
  echo "$L $C $H $(flag_value --n_kv_head "$H") $(flag_value --mlp_hidden $((C * 4))) $(flag_value --bias 1)"
}

# per run: steps, and the scheme/shape combination (build/params says what is forbidden)
make -s build/params >/dev/null || die "could not build build/params (HINT: make build/params)"
declare -A RUN_STEPS RUN_TPS
for name in "${RUNS[@]}"; do
  merged_flags "$name"
  B=$(flag_value -b "")
  T=$(flag_value -t "")
  if ! [[ $B =~ ^[0-9]+$ && $T =~ ^[0-9]+$ && $B -gt 0 && $T -gt 0 ]]; then
    cfg_error "${RUN_LINE[$name]}" "run '$name': -b and -t must be positive whole numbers in flags or on the run line (got -b '${B}' -t '${T}'), so that the runner can compute the steps"
    continue
  fi
  tps=$(flag_value -d $((B * T)))
  [ "$tps" = -1 ] && tps=$((B * T))
  if ! [[ $tps =~ ^[0-9]+$ ]] || [ "$tps" -eq 0 ]; then
    cfg_error "${RUN_LINE[$name]}" "run '$name': -d $tps: expected a positive whole number of tokens per step"
    continue
  fi
  if [[ $TOKENS =~ ^[0-9]+$ ]] && [ "$TOKENS" -gt 0 ] && { [ $((TOKENS % tps)) -ne 0 ] || [ "$TOKENS" -lt "$tps" ]; }; then
    cfg_error "${RUN_LINE[$name]}" "run '$name': tokens = $TOKENS is not a multiple of its $tps tokens per step (-d, or -b x -t), so it would not see the same tokens as the others"
    continue
  fi
  RUN_TPS[$name]=$tps
  RUN_STEPS[$name]=$((TOKENS / tps))
  shape=$(shape_of)
  if [ -n "$shape" ]; then
    # shellcheck disable=SC2086
    if ! why=$(./build/params "${RUN_SCHEME[$name]}" $shape 2>&1 >/dev/null); then
      cfg_error "${RUN_LINE[$name]}" "run '$name': ${why#params: }"
    fi
  fi
done
[ $errors -eq 0 ] || exit 1
if [ -z "$BASELINE" ]; then
  info "note: $CONFIG_SHOW has no run of scheme standard and no 'baseline = <run>': table.md's columns relative to standard will be n/a"
fi

# ---------------------------------------------------------------------------------------------
# 2. the trainer of this machine

DEVICE=${ABLATE_DEVICE:-}
if [ -z "$DEVICE" ]; then
  DEVICE=cpu
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then DEVICE=gpu; fi
fi
case $DEVICE in cpu|gpu) ;; *) die "ABLATE_DEVICE=$DEVICE: expected cpu or gpu" ;; esac
binary_of() { # SCHEME -> the path of its trainer on this device
  if [ "$DEVICE" = gpu ]; then
    if [ "$1" = standard ]; then echo ./train_gpt2cu; else echo "./train_gpt2cu_$1"; fi
  else
    echo "./build/train_gpt2_cpu_$1"
  fi
}
build_trainer() { # SCHEME
  local log=$OUT/build_$1.log
  if [ "$DEVICE" = gpu ]; then
    info "building $(binary_of "$1") (nvcc, minutes the first time)"
    make -s train_gpt2cu QKV="$1" >"$log" 2>&1 || die "the build of $(binary_of "$1") failed: $(grep -m1 -i error "$log" || tail -n 1 "$log") (see $log)"
  else
    make -s "build/train_gpt2_cpu_$1" >"$log" 2>&1 || die "the build of $(binary_of "$1") failed: $(grep -m1 -i error "$log" || tail -n 1 "$log") (see $log)"
  fi
}

# the trainer command of a run (an array in CMD), its steps (STEPS); how it starts (-y 1 or
# --overwrite 1) is start_flags', from what its folder holds
run_command() { # NAME
  local name=$1
  merged_flags "$name"
  STEPS=${RUN_STEPS[$name]}
  CMD=("$(binary_of "${RUN_SCHEME[$name]}")" -i "$TRAIN" -j "$VAL" -o "$OUT/$name" --seed "${KEY[seed]}" -x "$STEPS"
       -v "$EVAL_EVERY" -n "${KEY[checkpoint_every]:-$(((STEPS + 3) / 4))}" "${MERGED[@]}")
}

# The flags that start a run in DIR (array START): -y 1 when it holds a checkpoint to resume (a
# state_N.bin beside its model_N.bin, what the trainer looks for), else --overwrite 1 when an
# attempt that died before its first checkpoint left files there (the trainer refuses a used
# folder otherwise), else nothing. The trainer errors on -y 1 with nothing to resume.
start_flags() { # DIR
  local s
  START=()
  for s in "$1"/state_*.bin; do
    [ -f "$s" ] && [ -f "$1/model_${s##*/state_}" ] && { START=(-y 1); return; }
  done
  if compgen -G "$1/main.log" >/dev/null || compgen -G "$1/model_*.bin*" >/dev/null || compgen -G "$1/state_*.bin*" >/dev/null; then
    START=(--overwrite 1)
  fi
}

if [ "${ABLATE_PLAN_ONLY:-0}" = 1 ]; then
  info "$CONFIG_SHOW is valid: ${#RUNS[@]} runs on the $DEVICE trainer, $TOKENS tokens each; baseline ${BASELINE:-none}"
  for name in "${RUNS[@]}"; do
    run_command "$name"
    note=""
    [ -n "${SELECTED[$name]:-}" ] || note=" [not in ABLATE_RUNS: not trained now]"
    info "$name (${RUN_SCHEME[$name]}, $STEPS steps x ${RUN_TPS[$name]} tokens)$note: ${CMD[*]}"
  done
  exit 0
fi

"$PYTHON" -c "import matplotlib, numpy" 2>/dev/null ||
  die "$PYTHON cannot import matplotlib and numpy, which dev/ablate/report.py plots with (HINT: apt-get install python3-matplotlib python3-numpy)"

mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock -n 9 || die "another make ablate is writing into $OUT (HINT: wait for it, or use another OUT=)"

# ---------------------------------------------------------------------------------------------
# 3. the plan, then the runs, one after another

# the plan (report.py reads it), and a run already started with another command is refused
# before anything trains
{
  printf "# config\t%s\n# device\t%s\n# baseline\t%s\n" "$CONFIG_SHOW" "$DEVICE" "${BASELINE:-}"
  printf "# data\t%s\n# seed\t%s\n# tokens\t%s\n" "$TRAIN" "${KEY[seed]}" "$TOKENS"
  printf "name\tscheme\tsteps\ttokens_per_step\tcommand\n"
} >"$OUT/plan.tsv"
pending=0
for name in "${RUNS[@]}"; do
  run_command "$name"
  printf "%s\t%s\t%s\t%s\t%s\n" "$name" "${RUN_SCHEME[$name]}" "$STEPS" "${RUN_TPS[$name]}" "${CMD[*]}" >>"$OUT/plan.tsv"
  f=$OUT/$name/cmd.txt
  if [ -f "$f" ] && [ "$(cat "$f")" != "${CMD[*]}" ]; then
    die "run '$name' in $OUT/$name was started with another command ($(cat "$f")), the config now gives: ${CMD[*]} (HINT: rm -r $OUT/$name to redo it, or use another OUT=)"
  fi
  [ -f "$OUT/$name/DONE" ] || [ -z "${SELECTED[$name]:-}" ] || pending=$((pending + 1))
done
if [ $pending -gt 0 ] && [ -n "$DATA" ]; then bash "dev/data/prepare_$DATA.sh"; fi

info "$CONFIG_SHOW: runs ${#RUNS[@]} ($pending to train), on the $DEVICE trainer, $TOKENS tokens each, seed ${KEY[seed]}, data $TRAIN; output in $OUT"
for name in "${RUNS[@]}"; do
  scheme=${RUN_SCHEME[$name]}
  dir=$OUT/$name
  run_command "$name"
  steps=$STEPS
  cmd=("${CMD[@]}")
  if [ -f "$dir/DONE" ]; then
    info "skip $name: done ($dir/DONE)"
    continue
  fi
  if [ -z "${SELECTED[$name]:-}" ]; then
    info "skip $name: not in ABLATE_RUNS"
    continue
  fi
  mkdir -p "$dir"
  echo "${cmd[*]}" >"$dir/cmd.txt"
  build_trainer "$scheme"
  start_flags "$dir"
  cmd+=("${START[@]}")
  info "run $name ($scheme): $steps steps x ${RUN_TPS[$name]} tokens, log $dir/main.log${START[*]:+ (${START[*]})}"
  echo "${cmd[*]}" >>"$dir/stdout.log"
  start=$SECONDS
  set +e
  "${cmd[@]}" 2>&1 | tee -a "$dir/stdout.log"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    err=$(grep '^error' "$dir/stdout.log" | tail -n 1 || true)
    die "run '$name' exited with status $rc${err:+: $err} (see $dir/stdout.log; make ablate again resumes from its latest checkpoint)"
  fi
  echo "seconds $((SECONDS - start))" >"$dir/DONE"
  # keep the final model only: the training states and older models are for resuming
  latest=$(find "$dir" -maxdepth 1 -name 'model_*.bin' | sort | tail -n 1)
  find "$dir" -maxdepth 1 \( -name 'model_*.bin' -o -name 'state_*.bin' \) ! -path "$latest" -delete
  info "run $name done in $((SECONDS - start)) s"
done

# ---------------------------------------------------------------------------------------------
# 4. runs.csv, loss.png, table.md (once every run of the config is done)

undone=()
for name in "${RUNS[@]}"; do [ -f "$OUT/$name/DONE" ] || undone+=("$name"); done
if [ ${#undone[@]} -gt 0 ]; then
  info "$((${#RUNS[@]} - ${#undone[@]})) of ${#RUNS[@]} runs done; the report comes once ${undone[*]} are done too (ABLATE_RUNS=\"${undone[*]}\" make ablate CONFIG=$CONFIG_SHOW${OUT_ARG:+ OUT=$OUT_ARG})"
  exit 0
fi
"$PYTHON" dev/ablate/report.py "$OUT"
