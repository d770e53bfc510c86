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
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() { # name, args...: a check that dies without printing FAIL still counts as one
    local name=$1; shift
    "$PY" "$CHECK" "$@" 2>&1 | tee "$out"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
        failed=1
        grep -q '^FAIL ' "$out" || echo "FAIL reference $name: check_reference.py exited with $rc ($(tail -n 1 "$out"))"
    fi
}

run forbidden forbidden dev/fixtures/forbidden.tsv
if [ -x build/params ] || make -s build/params >/dev/null 2>&1; then
    run params params build/params
else
    echo "FAIL reference params: build/params does not build (make build/params)"
    failed=1
fi
run gradcheck gradcheck "$MANIFEST"
run roundtrip roundtrip "$MANIFEST"
run crosscheck crosscheck "$MANIFEST"
run bf16floor bf16floor "$MANIFEST"
exit $failed
