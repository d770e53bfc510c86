#!/usr/bin/env bash
# Checks `make params` (build/params, computed from the shapes by attention_variants.cuh) against
# the parameter counts and KV-cache sizes of VARIANTS.md. The expected numbers below are the
# spec's, transcribed; when ../shared/VARIANTS.md is beside the repository (as in CI) each one is
# also looked up there, so a typo here cannot hide.
set -u
cd "$(dirname "$0")/../.."
make -s build/params >/dev/null || { echo "FAIL params: build/params does not build"; exit 1; }
out=$(./build/params) || { echo "FAIL params: build/params exited non-zero"; exit 1; }
spec=../shared/VARIANTS.md
fail=0

# fields: scheme L C H Hkv mlp bias | total non_embedding kv_bytes_per_token ('-' = not in the spec)
expected=(
  "standard 12 768 12 12 3072 0 | 124373760 84953856 -"
  "q_identity 12 768 12 12 3072 0 | 117295872 77875968 -"
  "standard 12 768 12 12 2688 0 | 117295872 77875968 -"
  "standard 12 744 12 12 2976 0 | 117915816 79727784 -"
  "q_identity 12 768 12 12 3456 0 | 124373760 84953856 -"
  "q_residual 12 768 12 12 3072 0 | 124392192 84972288 -"
  "standard 20 1024 16 16 4096 1 | 305534976 - 81920"
  "kv_shared 20 1024 16 16 4096 1 | 284542976 - 40960"
  "qk_shared 20 1024 16 16 4096 1 | 284542976 - -"
  "qkv_shared 20 1024 16 16 4096 1 | 263550976 - -"
  "standard 20 1024 16 4 4096 1 | 274046976 - 20480"
  "standard 20 1024 16 1 4096 1 | 266174976 - 5120"
  "kv_shared 20 1024 16 4 4096 1 | 268798976 - 10240"
  "kv_shared 20 1024 16 1 4096 1 | 264862976 - 2560"
  "standard 22 2048 32 32 8192 1 | 1215102976 - -"
  "kv_shared 22 2048 32 32 8192 1 | 1122783232 - -"
  "standard 22 2048 32 8 8192 1 | 1076623360 - -"
  "standard 22 2048 32 1 8192 1 | 1036233472 - -"
  "kv_shared 22 2048 32 8 8192 1 | 1053543424 - -"
  "kv_shared 22 2048 32 1 8192 1 | 1033348480 - -"
)

# 124373760 -> 124,373,760 as the spec writes it
with_commas() { printf "%s" "$1" | rev | sed 's/\([0-9]\{3\}\)/\1,/g; s/,$//' | rev; }

if [ "$(printf "%s\n" "$out" | wc -l)" -ne "${#expected[@]}" ]; then
  echo "FAIL params: build/params printed $(printf "%s\n" "$out" | wc -l) lines, expected ${#expected[@]} (one per VARIANTS.md configuration)"
  fail=1
fi
for row in "${expected[@]}"; do
  read -r s L C H Hkv M b _ total nonemb kvb <<<"$row"
  line=$(printf "%s\n" "$out" | grep -E "^scheme=$s n_layer=$L n_embd=$C n_head=$H n_kv_head=$Hkv mlp=$M bias=$b " || true)
  name="$s L=$L C=$C H=$H Hkv=$Hkv mlp=$M bias=$b"
  if [ -z "$line" ]; then echo "FAIL params $name: no such line in make params"; fail=1; continue; fi
  got_total=$(sed -n 's/.* total=\([0-9]*\).*/\1/p' <<<"$line")
  got_nonemb=$(sed -n 's/.* non_embedding=\([0-9]*\).*/\1/p' <<<"$line")
  got_kvb=$(sed -n 's/.* kv_bytes_per_token=\([0-9]*\).*/\1/p' <<<"$line")
  ok=1; why=""
  [ "$got_total" = "$total" ] || { ok=0; why="$why total=$got_total expected $total;"; }
  [ "$nonemb" = "-" ] || [ "$got_nonemb" = "$nonemb" ] || { ok=0; why="$why non_embedding=$got_nonemb expected $nonemb;"; }
  [ "$kvb" = "-" ] || [ "$got_kvb" = "$kvb" ] || { ok=0; why="$why kv_bytes_per_token=$got_kvb expected $kvb;"; }
  if [ -f "$spec" ]; then
    for n in "$total" "$nonemb" "$kvb"; do
      [ "$n" = "-" ] && continue
      grep -q "$(with_commas "$n")" "$spec" || { ok=0; why="$why $n is not in $spec (transcription error?);"; }
    done
  fi
  if [ $ok = 1 ]; then
    echo "PASS params $name total=$got_total non_embedding=$got_nonemb kv_bytes_per_token=$got_kvb"
  else
    echo "FAIL params $name:$why"; fail=1
  fi
done
[ -f "$spec" ] || echo "SKIP params cross-check against VARIANTS.md: $spec not found beside the repository (the transcribed numbers above were still checked)"
exit $fail
