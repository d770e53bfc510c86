#!/usr/bin/env bash
# Checks of the PyTorch reference (dev/reference/train_gpt2.py) itself, one PASS/FAIL line each:
#   forbidden   every scheme/shape combination of dev/fixtures/forbidden.tsv is refused (one line, no traceback)
#   params      the torch model's parameter counts equal build/params (attention_variants.cuh), same refusals
#   gradcheck   central differences in float64 against autograd, one tiny fixture per scheme (+ GQA/MQA)
#   roundtrip   checkpoints v6/v7 written and re-loaded give identical logits; v3 reads; bad files refused
#   crosscheck  every fixture against an independent formulation (torch.nn.functional, torch.optim.AdamW);
#               att rebuilt from q, k and att_lse equals att
#   bf16floor   the reference's own BF16 error on each fixture's 10-step trajectory is under test_gpt2.cu's
#               BF16 tolerances (fp32 master weights, bf16 compute, as the CUDA BF16 build)
# Assumes the fixtures exist: /usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures
set -u
cd "$(dirname "$0")/../.."
source dev/test/jobs.sh
PY=/usr/bin/python3
CHECK=dev/reference/check_reference.py
MANIFEST=dev/fixtures/manifest.tsv

if ! "$PY" -c "import torch, numpy" 2>/dev/null; then
    echo "FAIL reference: $PY cannot import torch and numpy (HINT: bash dev/test/install_deps.sh installs python3-torch)"
    exit 1
fi
if [ ! -f "$MANIFEST" ] || [ ! -f dev/fixtures/forbidden.tsv ]; then
    echo "FAIL reference fixtures: $MANIFEST or dev/fixtures/forbidden.tsv missing (HINT: $PY dev/reference/make_fixtures.py --out dev/fixtures)"
    exit 1
fi

failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# one check into $tmp/<name>.out; a check that dies without printing FAIL still counts as one
check() { # name, check_reference.py arguments...
  local name=$1; shift
  "$PY" "$CHECK" "$@" >"$tmp/$name.out" 2>&1
  local rc=$?
  if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$tmp/$name.out"; then
    echo "FAIL reference $name: check_reference.py exited with $rc ($(tail -n 1 "$tmp/$name.out"))" >>"$tmp/$name.out"
  fi
  return 0
}

# Each check is one process on one core (check_reference.py sets torch to one thread): two at a time,
# bf16floor (most of the time: 10 BF16 steps per fixture) in two halves of the manifest. Their lines
# are printed afterwards, in this order.
names=(forbidden params gradcheck roundtrip crosscheck bf16floor_a bf16floor_b)
awk 'NR % 2 == 1' "$MANIFEST" >"$tmp/manifest_a.tsv"
awk 'NR % 2 == 0' "$MANIFEST" >"$tmp/manifest_b.tsv"
if [ ! -x build/params ] && ! make -s build/params >/dev/null 2>&1; then
  echo "FAIL reference params: build/params does not build (make build/params)" >"$tmp/params.out"
  params_args=()
else
  params_args=(params build/params)
fi
jobs_list=("bf16floor_a bf16floor $tmp/manifest_a.tsv" "bf16floor_b bf16floor $tmp/manifest_b.tsv"
           "crosscheck crosscheck $MANIFEST" "roundtrip roundtrip $MANIFEST" "gradcheck gradcheck $MANIFEST"
           "forbidden forbidden dev/fixtures/forbidden.tsv")
[ ${#params_args[@]} -gt 0 ] && jobs_list+=("params ${params_args[*]}")
run_jobs 2 check "${jobs_list[@]}"
for name in "${names[@]}"; do
  cat "$tmp/$name.out"
  grep -q '^FAIL ' "$tmp/$name.out" && failed=1
done
exit $failed
