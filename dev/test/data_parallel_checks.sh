#!/usr/bin/env bash
# The checks both data-parallel suites make (dev/test/test_mpi.sh, the CPU trainer over MPI;
# dev/test/test_nccl.sh, the CUDA trainer over NCCL on the CPU runtime), sourced by them. The caller
# defines pass, fail, $tmp and $PY.

# dp_inputs: the tiny fixture model (or the suite ends) and synthetic shards in $tmp; sets F, the
# flags both suites train with: 10 steps of -b 4 -t 32 -d 256, two micro-batches a step
dp_inputs() {
  local model=dev/fixtures/standard_tiny_model.bin
  [ -f "$model" ] || { fail "fixture: $model missing (HINT: /usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures)"; exit 1; }
  "$PY" dev/test/synth_shards.py "$tmp"
  F=(-e "$model" -i "$tmp/synth_train_*.bin" -j "$tmp/synth_val_*.bin" -b 4 -t 32 -d 256 -x 10 -l 1e-3 -s 0 -v 5 -m 4)
}

# compare OUT_A OUT_B STEP [PARAM_TOL LOSS_TOL]: the losses of both main.log files (to LOSS_TOL, default
# 1e-5) and the model and state of step STEP: relative L2 of the parameters (to PARAM_TOL, default 1e-6;
# bf16 model files read as bf16) and of each part of the state (m, v, master weights: 1e-6)
compare() {
  "$PY" - "$@" <<'PYEOF'
import os, re, sys
import numpy as np
a, b, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
ptol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-6
ltol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-5
def losses(d):
    out = {}
    for line in open(d + "/main.log"):
        m = re.match(r"^step (\d+)(?:/\d+ \| loss| \| val loss) (\S+)", line)
        if m:
            out[(m.group(1), "val" if "val" in line else "train")] = float(m.group(2))
    return out
la, lb = losses(a), losses(b)
if not la or set(la) != set(lb):
    sys.exit("logged steps differ: %s vs %s" % (sorted(la)[:4], sorted(lb)[:4]))
dl = max(abs(la[k] - lb[k]) for k in la)
def params(d):
    # the model file's values (fp32, or bf16 read as such) and how many kinds of values the state has
    # for each parameter: m and v, then the master weights where the run had them
    raw = np.fromfile("%s/model_%08d.bin" % (d, step), dtype=np.uint8, offset=1024)
    state_floats = (os.path.getsize("%s/state_%08d.bin" % (d, step)) - 1088) // 4
    for width, kinds in ((4, 2), (2, 3), (2, 2)):
        if raw.size * kinds == state_floats * width:
            if width == 4:
                return raw.view(np.float32), kinds
            return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32), kinds
    sys.exit("%s: a model file of %d bytes and a state of %d values do not go together" % (d, raw.size, state_floats))
pa, ka = params(a)
pb, kb = params(b)
sa = np.fromfile("%s/state_%08d.bin" % (a, step), dtype=np.float32, offset=1088)
sb = np.fromfile("%s/state_%08d.bin" % (b, step), dtype=np.float32, offset=1088)
n = len(pa)
if len(pb) != n or ka != kb or len(sa) != ka * n or len(sb) != ka * n:
    sys.exit("sizes differ: %d/%d parameters, %d/%d state values" % (n, len(pb), len(sa), len(sb)))
rel = lambda x, y: float(np.linalg.norm(x - y) / np.linalg.norm(x))
names = ["m", "v", "master"]
r = [rel(sa[k * n:(k + 1) * n], sb[k * n:(k + 1) * n]) for k in range(ka)]
rp = rel(pa, pb)
msg = "losses within %.1e (%d logged), relative L2 at step %d: parameters %.2e, %s" % (
    dl, len(la), step, rp, ", ".join("%s %.2e" % (names[k], r[k]) for k in range(ka)))
if dl > ltol or rp > ptol or max(r) > 1e-6:
    sys.exit(msg + " (expected losses within %g, parameters %g, the state 1e-6)" % (ltol, ptol))
print(msg)
PYEOF
}

# resume_check NAME FROM REF LOG WHAT COMMAND...: FROM's checkpoint of step 5, copied into $tmp/NAME, resumed
# to step 10 by COMMAND -n 5 -o $tmp/NAME -y 1 (its output into $tmp/NAME.log), against REF, one process's
# uninterrupted run; LOG is the log that must say it resumed from step 5 (rank 0's, where ranks log apart)
resume_check() {
  local name=$1 from=$2 ref=$3 log=$4 what=$5 rc msg
  shift 5
  cp -r "$from" "$tmp/$name" && rm "$tmp/$name/"*_00000010.bin
  "$@" -n 5 -o "$tmp/$name" -y 1 >"$tmp/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q "^resuming from $tmp/$name/state_00000005.bin at step 5" "$log" &&
     msg=$(compare "$ref" "$tmp/$name" 10 2>&1); then
    pass "$name: $what: $msg"
  else
    fail "$name: exit $rc: ${msg:-} $(grep -m1 'error\|resuming' "$log")"
  fi
}

# refuse NAME WANT COMMAND...: COMMAND must exit non-zero with a line matching WANT (an ERE of the
# whole line) in its output
refuse() {
  local name=$1 want=$2
  shift 2
  "$@" >"$tmp/refuse.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] && grep -Eq "$want" "$tmp/refuse.log"; then
    pass "refused_$name: exit $rc, '$(grep -m1 -E "$want" "$tmp/refuse.log")'"
  else
    fail "refused_$name: exit $rc, expected a line matching '$want': $(grep -m1 -i error "$tmp/refuse.log")"
  fi
}
