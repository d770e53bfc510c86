#!/usr/bin/env bash
# Checks `make params` (build/params, computed from the shapes by attention_variants.cuh) against
# the parameter counts and KV-cache sizes of dev/SCHEMES.md (section 6). The expected numbers below are
# the external spec's, transcribed; when ../shared/VARIANTS.md is beside the repository (as in CI) each one is
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
  echo "FAIL params: build/params printed $(printf "%s\n" "$out" | wc -l) lines, expected ${#expected[@]} (one per dev/SCHEMES.md configuration)"
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
# ---- params memory: the CUDA trainer's training memory (gpt2_training_memory, the lists gpt2_build
# allocates with), checked against a hand computation of the same tensors
r() { echo $(( ($1 + $2 - 1) / $2 * $2 )); } # round $1 up to a multiple of $2
# parameter elements on the device, standard scheme, tied head: each tensor padded to 128 elements
param_elems() { # L C H Hkv M bias maxT
  local L=$1 C=$2 H=$3 Hkv=$4 M=$5 b=$6 maxT=$7 Vp=50304
  local W=$(( C + 2 * Hkv * (C / H) ))
  echo $(( $(r $((Vp * C)) 128) + $(r $((maxT * C)) 128) + $(r $((L * C)) 128) + b * $(r $((L * C)) 128)
         + $(r $((L * W * C)) 128) + b * $(r $((L * W)) 128) + $(r $((L * C * C)) 128) + b * $(r $((L * C)) 128)
         + $(r $((L * C)) 128) + b * $(r $((L * C)) 128) + $(r $((L * M * C)) 128) + b * $(r $((L * M)) 128)
         + $(r $((L * C * M)) 128) + b * $(r $((L * C)) 128) + $(r $C 128) + b * $(r $C 128) ))
}
field() { awk -v k="$1" '$1 == k { print $2 }' <<<"$2"; } # the bytes of a report row
mem_check() { # name, report, then pairs row=expected_bytes
  local name=$1 rep=$2 ok=1 why=""; shift 2
  for kv in "$@"; do
    local got; got=$(field "${kv%%=*}" "$rep")
    [ "$got" = "${kv#*=}" ] || { ok=0; why="$why ${kv%%=*}=$got expected ${kv#*=};"; }
  done
  if [ $ok = 1 ]; then echo "PASS params memory $name: $*"; else echo "FAIL params memory $name:$why"; fail=1; fi
}

# (a) d12 (GPT-2 124M: L 12, C 768, H 12, biases, vocab 50304, wpe 1024) at B 64, T 1024, bf16, fused
L=12; C=768; H=12; M=3072; B=64; T=1024; Vp=50304; BT=$((B * T)); W=$((3 * C))
if rep=$(./build/params memory d12 $T $B bf16 fused 2>&1); then
  np=$(param_elems $L $C $H $H $M 1 1024)
  # activations, fused path, recompute off: (bf16 tensors) x 2 bytes, (fp32 tensors) x 4, each rounded to 256 bytes;
  # the logits two chunks of 8192 rows (the classifier's two buffers: B*T is more than a chunk)
  act=0
  for bytes in $((BT*C*2)) $((L*BT*C*2)) $((L*BT*4)) $((L*BT*4)) $((L*BT*W*2)) $((L*B*H*T*4)) \
               $((L*BT*C*2)) $((L*BT*C*2)) $((L*BT*C*2)) $((L*BT*4)) $((L*BT*4)) $((L*BT*M*2)) $((L*BT*M*2)) \
               $((L*BT*C*2)) $((BT*C*2)) $((BT*4)) $((BT*4)) $((2*8192*Vp*2)) $((BT*4)) $((BT*C*2)); do
    act=$(( act + $(r $bytes 256) ))
  done
  # ... dresidual, dbuf_c, dbuf_m (B, T, M), dln1, dqkv (bf16) and the flash backward's delta (B, H, T) fp32
  dact=0
  for bytes in $((BT*C*2)) $((BT*C*2)) $((BT*M*2)) $((BT*C*2)) $((BT*W*2)) $((B*H*T*4)); do
    dact=$(( dact + $(r $bytes 256) ))
  done
  mem_check "d12 B=64 T=1024 bf16 fused" "$rep" parameters=$((np * 2)) gradients=$((np * 4)) optimizer=$((np * 8)) \
    master_weights=$((np * 4)) activations=$act activation_grads=$dact total=$((np * 18 + act + dact))
else
  echo "FAIL params memory d12 B=64 T=1024: exited non-zero: $rep"; fail=1
fi
# the recompute levels: -r 1 keeps one layer's fch_gelu (B, T, M), -r 2 also one layer's ln1 and ln2 (B, T, C)
a0=$(field activations "$(./build/params memory d12 1024 64 bf16 fused -r 0 2>&1)")
a1r=$(field activations "$(./build/params memory d12 1024 64 bf16 fused -r 1 2>&1)")
a2r=$(field activations "$(./build/params memory d12 1024 64 bf16 fused -r 2 2>&1)")
if [ -n "$a0" ] && [ $((a0 - a1r)) -eq $(( (12 - 1) * 65536 * 3072 * 2 )) ] && [ $((a1r - a2r)) -eq $(( 2 * (12 - 1) * 65536 * 768 * 2 )) ]; then
  echo "PASS params memory -r 1 saves $(( (a0 - a1r) >> 20 )) MiB (11 layers of fch_gelu), -r 2 $(( (a1r - a2r) >> 20 )) MiB more (11 layers of ln1, ln2)"
else
  echo "FAIL params memory recompute levels: activations -r 0/1/2 = '$a0' / '$a1r' / '$a2r' bytes"; fail=1
fi
# a shape where the 128-element padding of the parameters shows (C 100: ln1w 100 -> 128, ...), fp32,
# where hd 25 has no fused kernel so the unfused path is the default, and FP32 keeps no master weights
if rep=$(./build/params memory standard 1 100 4 4 400 1 64 2 fp32 2>&1); then
  np=$(param_elems 1 100 4 4 400 1 1024)
  grep -q "attention=unfused" <<<"$rep" || { echo "FAIL params memory padding: the default path for hd 25 is not unfused"; fail=1; }
  mem_check "padding C=100 fp32" "$rep" parameters=$((np * 4)) gradients=$((np * 4)) optimizer=$((np * 8)) master_weights=0
else
  echo "FAIL params memory padding shape: exited non-zero: $rep"; fail=1
fi

# (b) fused: activations grow linearly in T (no (T, T) tensor): T 4096 at most 4.2x T 1024
a1=$(field activations "$(./build/params memory d12 1024 64 bf16 fused 2>&1)")
a4=$(field activations "$(./build/params memory d12 4096 64 bf16 fused 2>&1)")
if [ -n "$a1" ] && [ -n "$a4" ] && [ $((a4 * 10)) -le $((a1 * 42)) ]; then
  echo "PASS params memory fused activations T=4096 / T=1024 = $(awk -v a="$a4" -v b="$a1" 'BEGIN { printf "%.4f", a / b }') (<= 4.2)"
else
  echo "FAIL params memory fused activations T=4096 ($a4 bytes) vs T=1024 ($a1 bytes): expected at most 4.2x"; fail=1
fi

# (c) unfused: the activations hold att (L, B, H, T, T), so at T 4096 they exceed fused by at least its bytes
rep=$(./build/params memory d12 4096 64 bf16 unfused 2>&1)
u4=$(field activations "$rep")
att=$(awk '$1 == "att" { for (i = 1; i <= NF; i++) if ($i ~ /^elements=/) { sub("elements=", "", $i); print $i } }' <<<"$rep")
if [ "$att" = "$((12 * 64 * 12 * 4096 * 4096))" ] && [ -n "$u4" ] && [ -n "$a4" ] && [ "$u4" -ge $((a4 + att * 2)) ]; then
  echo "PASS params memory unfused T=4096: att has L*B*H*T*T = $att elements; activations $u4 bytes >= fused $a4 + att"
else
  echo "FAIL params memory unfused T=4096: att elements '$att' expected $((12 * 64 * 12 * 4096 * 4096)); activations '$u4' vs fused '$a4'"; fail=1
fi

# (d) bad arguments: one line on stderr, nothing on stdout, non-zero exit
bad_args=(
  "memory"
  "memory d12 1024"
  "memory d12 1024 0"
  "memory d12 x 64"
  "memory d12 1024 64 bf17"
  "memory d12 1024 64 bf16 fp32"
  "memory d12 1024 64 fp32 fused"
  "memory d12 1024 64 -r 3"
  "memory nope 12 768 12 12 3072 1 1024 64"
  "memory standard 12 768 12 5 3072 1 1024 64"
  "memory standard 12 768 12 12 3072 1 1024"
  # shapes whose counts do not fit in 64 bits: refused, not wrapped (once printed total=4612389687757832193)
  "standard 2147483647 65536 1 1 2147483647 1"
  "kv_shared 2147483647 65536 2 1 2147483647 0 2147483647"
  "profile"
  "profile d12 1024"
  "profile d12 1024 64 --csv"
  "profile d12 1024 64 --csv /nonexistent_dir/p.csv"
  "profile d12 1024 64 --csv a.csv --csv b.csv"
  "profile d12 1024 64 fp32 fused"
  "memory d12 1024 64 --csv build/m.csv"
  "profile d12 1024 64 --micro_steps 0"
  "profile d12 1024 64 --micro_steps 4x"
  "profile d12 1024 64 --learn"
  "profile d12 1024 64 --learn /nonexistent_dir/record.txt"
  "profile d12 1024 64 --learn README.md"
  "profile d12 1024 64 --learn build/params_learn_badrow.txt"
  "profile d12 1024 64 --learn build/params_learn_unknown.txt"
  "profile d12 1024 64 --learn build/params_learn_nodate.txt"
  "memory d12 1024 64 --learn build/params_learn_later.txt"
)
# records for --learn (dev/results/'s H200 record of c32bccf, its table and header made wrong in one
# place each; and made later than every change of kProfileChanges, for (f) below)
record=dev/results/2026-11-27_NVIDIA-H200_gpu_call1_c32bccf.txt
sed '0,/^    profile qkv_fwd /s/^    profile qkv_fwd .*/    profile qkv_fwd 3.898 oops/' "$record" >build/params_learn_badrow.txt
sed '0,/^    profile qkv_fwd /s/^    profile qkv_fwd /    profile qkv_sideways /' "$record" >build/params_learn_unknown.txt
sed '/^date:/d' "$record" >build/params_learn_nodate.txt
sed 's/^date:    2026-11-27/date:    2099-01-01/' "$record" >build/params_learn_later.txt
for args in "${bad_args[@]}"; do
  # shellcheck disable=SC2086 # word splitting of the argument list is wanted
  ./build/params $args >build/params_bad.out 2>build/params_bad.err; rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <build/params_bad.err)" -eq 1 ] && [ ! -s build/params_bad.out ]; then
    echo "PASS params refuses '$args': $(cat build/params_bad.err)"
  else
    echo "FAIL params '$args': exit $rc, $(wc -l <build/params_bad.err) stderr lines, $(wc -c <build/params_bad.out) stdout bytes (expected non-zero, 1, 0)"; fail=1
  fi
done

# (e) params profile (dev/trainer/profile.h): the per-sublayer costs of a step. For every scheme, with GQA,
# without biases, in fp32 (unfused attention) and with recomputation: the rows' FLOPs plus 6 per
# non-matmul parameter must be llm.c's 6 N + 6 L C T exactly (params checks it, exit 1 otherwise).
t0=$SECONDS
profile_shapes=()
for s in $(make -s --no-print-directory schemes); do
  profile_shapes+=("$s 12 768 12 12 3072 1 1024 2" "$s 4 256 4 4 1024 0 256 2 fp32 unfused")
done
profile_shapes+=("standard 12 768 12 4 3072 1 1024 2" "kv_shared 12 768 12 1 3072 1 1024 2" "q_residual 6 512 4 2 2048 1 512 3 -r 2"
                 "q_identity 12 768 12 3 3072 0 2048 1 -r 1 -w 0" "standard 20 1024 16 16 4096 1 2048 1 unfused")
n_exact=0
for args in "${profile_shapes[@]}"; do
  # shellcheck disable=SC2086 # word splitting of the argument list is wanted
  line=$(./build/params profile $args 2>&1 | grep '^profile flops per sequence')
  if [ "${PIPESTATUS[0]}" -eq 0 ] && echo "$line" | grep -q ': exact$'; then
    n_exact=$((n_exact + 1))
  else
    echo "FAIL params profile $args: $line"; fail=1
  fi
done
[ "$n_exact" -eq "${#profile_shapes[@]}" ] &&
  echo "PASS params profile: the rows' FLOPs + 6 x the non-matmul parameters = 6 N + 6 L C T exactly, for $n_exact shapes (every scheme, GQA/MQA, no biases, fp32, -r 1/2)"

# each scheme's projection GEMM, computed here by hand: qkv_fwd = L x 2 B T C x width, width = what
# the scheme projects (standard C + 2 KV, q_identity 2 KV: no Q GEMM, kv_shared C + KV: one K=V
# projection, qkv_shared C), and the attention rows: forward 2, backward 4 x L B T C T FLOPs
hand_checks=(
  "standard 12 768 12 12 3072 1 1024 64|qkv_fwd|$((12 * 2 * 64 * 1024 * 768 * 2304))"
  "q_identity 12 768 12 12 3072 1 1024 64|qkv_fwd|$((12 * 2 * 64 * 1024 * 768 * 1536))"
  "kv_shared 12 768 12 4 3072 1 1024 64|qkv_fwd|$((12 * 2 * 64 * 1024 * 768 * (768 + 256)))"
  "qkv_shared 12 768 12 12 3072 1 1024 64|qkv_fwd|$((12 * 2 * 64 * 1024 * 768 * 768))"
  "q_residual 12 768 12 12 3072 1 1024 64|qres_fwd|$((12 * 2 * 2 * 64 * 1024 * 768 * 384))"
  "standard 12 768 12 12 3072 1 1024 64|attn_fwd|$((12 * 2 * 64 * 1024 * 768 * 1024))"
  "standard 12 768 12 12 3072 1 1024 64 --flash 2|attn_bwd_dkdv|$((12 * 3 * 64 * 1024 * 768 * 1024))"
  "standard 12 768 12 12 3072 1 1024 64 --flash 4|attn_bwd_dq|$((12 * 1 * 64 * 1024 * 768 * 1024))"
  "standard 12 768 12 12 3072 1 1024 64 --flash 3|attn_bwd|$((12 * 4 * 64 * 1024 * 768 * 1024))"
  "standard 12 768 12 12 3072 1 1024 64 unfused|attn_bwd|$((12 * 4 * 64 * 1024 * 768 * 1024))"
  "standard 12 768 12 12 3072 1 1024 64|classifier|$((6 * 64 * 1024 * 50304 * 768))"
)
for hc in "${hand_checks[@]}"; do
  IFS='|' read -r args row want <<<"$hc"
  # shellcheck disable=SC2086
  ./build/params profile $args --csv build/params_profile.csv >/dev/null 2>&1
  got=$(awk -F, -v r="$row" '$1 == r { printf "%.0f", $2 }' build/params_profile.csv 2>/dev/null)
  if [ "$got" = "$want" ]; then
    echo "PASS params profile $row of '$args': $got FLOPs, as computed by hand"
  else
    echo "FAIL params profile $row of '$args': '$got' FLOPs, expected $want"; fail=1
  fi
done

# the bias gradients' column sums: with --bias_fusion 0 a pass of their own over dY, at 3.0 TB/s, added
# to the backward matmul rows: predicted minus the row's own max(FLOPs at 85% of 790 TFLOP/s, bytes at
# 3.0 TB/s), over qkv/attproj/fc/fcproj_bwd, against L x B T x (3C + C + 4C + C) x 2 bytes by hand; 0
# without biases, and 0 with the trainer's default --bias_fusion 1 (the dW GEMMs' BGRADB epilogue)
for hc in "standard 12 768 12 12 3072 1 1024 64 --bias_fusion 0|$(awk 'BEGIN { printf "%.4f", 12 * 64 * 1024 * (2304 + 768 + 3072 + 768) * 2 / 3.0e12 * 1e3 }')" \
          "standard 12 768 12 12 3072 0 1024 64 --bias_fusion 0|0.0000" \
          "standard 12 768 12 12 3072 1 1024 64|0.0000"; do
  IFS='|' read -r args want <<<"$hc"
  # shellcheck disable=SC2086
  out=$(./build/params profile $args --csv build/params_profile.csv 2>&1)
  got=$(awk -F, '$1 ~ /^(qkv|attproj|fc|fcproj)_bwd$/ { t = $2 / (790e12 * 0.85); m = $3 / 3.0e12; if (m > t) t = m; s += $5 - t * 1e3 }
                 END { printf "%.4f", s }' build/params_profile.csv 2>/dev/null)
  fusion=$(printf "%s\n" "$out" | grep -o 'bias_fusion=[01]' | head -n1)
  want_fusion=bias_fusion=$([[ "$args" == *"--bias_fusion 0"* ]] && echo 0 || echo 1)
  if [ -n "$got" ] && [ "$fusion" = "$want_fusion" ] && awk -v g="$got" -v w="$want" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d < 2e-3) }'; then
    echo "PASS params profile bias pass of '$args' ($fusion): $got ms over the backward matmul rows, $want by hand"
  else
    echo "FAIL params profile bias pass of '$args': '$got' ms, '$fusion' in the header, expected $want and $want_fusion"; fail=1
  fi
done
run_capture() { out=$(./build/params "$@" 2>&1); rc=$?; }
run_capture profile d12 1024 64 --bias_fusion 2
if [ "$rc" -ne 0 ] && [ "$(printf "%s\n" "$out" | wc -l)" -eq 1 ] && printf "%s\n" "$out" | grep -q "^params: --bias_fusion is '2', expected 0 or 1$"; then
  echo "PASS params profile --bias_fusion 2: refused in one line ($out)"
else
  echo "FAIL params profile --bias_fusion 2: exit $rc, expected 1 and one line naming the flag, got: $out"; fail=1
fi

# the table of d12 at B 64 by default (flash forward 3, backward 4, as the trainer's), with the flash
# kernels' version 2 in both directions, and with --flash 4 (the default's versions): the fused path's three
# backward rows (not the unfused one), the total row the sum of the rows, the CSV the table's rows, the
# header naming both versions (--flash 3 has one backward row: the hand check above)
for flash in "" "--flash 2" "--flash 4"; do
  case $flash in "") header="(flash forward 3, backward 4)" ;; "--flash 2") header="(flash forward 2, backward 2)" ;;
                 *) header="(flash forward 3, backward 4)" ;; esac
  # shellcheck disable=SC2086
  out=$(./build/params profile d12 1024 64 $flash --csv build/params_profile.csv) || { echo "FAIL params profile d12 1024 64 $flash: exit non-zero"; fail=1; }
  rows=$(awk -F, 'NR > 1 && $1 != "total" { print $1 }' build/params_profile.csv | tr '\n' ' ')
  sum_ok=$(awk -F, 'NR > 1 && $1 != "total" { s += $5 } $1 == "total" { t = $5 } END { d = s - t; if (d < 0) d = -d; print (d < 1e-3 && t > 0) ? 1 : 0 }' build/params_profile.csv)
  if [ "$rows" = "encoder_fwd ln1_fwd qkv_fwd attn_fwd attproj_fwd ln2_fwd fc_fwd fcproj_fwd lnf_fwd classifier lnf_bwd fcproj_bwd fc_bwd ln2_bwd attproj_bwd attn_bwd_delta attn_bwd_dkdv attn_bwd_dq qkv_bwd ln1_bwd encoder_bwd zero_grad grad_norm adamw " ] &&
     [ "$sum_ok" = 1 ] && [ "$(printf "%s\n" "$out" | grep -c "^profile ")" -eq 29 ] && printf "%s\n" "$out" | grep -q '^profile predicted step [0-9.]* ms: [0-9]* tokens/s' &&
     printf "%s\n" "$out" | head -n1 | grep -qF "attention=fused $header"; then
    echo "PASS params profile d12 1024 64${flash:+ $flash}: $header, 24 rows (flash backward in three), total = sum of the rows, $(printf "%s\n" "$out" | grep '^profile predicted step' | cut -c9-80)"
  else
    echo "FAIL params profile d12 1024 64${flash:+ $flash}: rows '$rows', sum check $sum_ok, $(printf "%s\n" "$out" | grep -c '^profile ') profile lines (expected 29), header '$(printf "%s\n" "$out" | head -n1 | grep -o 'attention=[^)]*)')' (expected '$header')"; fail=1
  fi
done

# (f) --learn: the cost model taught by the H200's record. Against a record later than every change,
# each row's learned time is its measured one (within the table's rounding), and the learned total the
# record's step; against the record itself, the rows changed since it was measured are exactly those
# kProfileChanges names (their rules: flash backward version 4, the tuned GEMMs, the classifier's
# stream, the staged batch), every other row its measured time, and the total the sum of the rows.
# "Its measured time": within what the rounding of the record's roof_ms (3 decimals) moves, 1e-3 ms + 1% of the time
learned_table() { ./build/params profile d12 1024 64 --learn "$1" | sed -n '/^profile learned from /,$p'; }
later=$(learned_table build/params_learn_later.txt)
worst=$(awk '$1 == "profile" && $3 ~ /^[0-9.]+$/ && $2 != "total" { d = $4 - $3; if (d < 0) d = -d; d = d / (1e-3 + 1e-2 * $3); if (d > w) w = d } END { printf "%.2f", w }' <<<"$later")
same_total=$(awk '$2 == "total" { d = $4 - $3; if (d < 0) d = -d; print (d < 0.03) ? 1 : 0 }' <<<"$later")
if [ -n "$later" ] && awk -v w="$worst" 'BEGIN { exit !(w <= 1) }' && [ "$same_total" = 1 ] &&
   grep -q '(learned: 0 rows changed since, 0 not in the record)' <<<"$later"; then
  echo "PASS params profile --learn, a record later than every change: each row its measured time (at most $worst of the tolerance), the step the record's ($(grep '^profile step' <<<"$later" | cut -c15-60)...)"
else
  echo "FAIL params profile --learn, a record later than every change: rows up to '$worst' x the tolerance from the record's, total check '$same_total', step line '$(grep '^profile step' <<<"$later")'"; fail=1
fi
now=$(learned_table "$record")
changed=$(awk '$1 == "profile" && / changed 20/ { printf "%s ", $2 }' <<<"$now")
kept=$(awk '$1 == "profile" && / the record.s efficiency/ { d = $4 - $3; if (d < 0) d = -d; if (d > 1e-3 + 1e-2 * $3) printf "%s ", $2 }' <<<"$now")
sum_ok=$(awk '$1 == "profile" && $3 ~ /^[0-9.]+$/ && $2 != "total" { s += $4 } $2 == "total" { t = $4 } END { d = s - t; if (d < 0) d = -d; print (d < 0.01 && t > 0) ? 1 : 0 }' <<<"$now")
if [ "$changed" = "encoder_fwd qkv_fwd attproj_fwd fc_fwd fcproj_fwd classifier fcproj_bwd fc_bwd attproj_bwd attn_bwd_dkdv attn_bwd_dq qkv_bwd " ] &&
   [ -z "$kept" ] && [ "$sum_ok" = 1 ] && grep -q '^profile step: measured 126.91 ms (NVIDIA H200, c32bccf, at the record.s shape) | predicted for this build and shape [0-9.]* ms' <<<"$now"; then
  echo "PASS params profile --learn $record: 12 rows changed since, predicted by their rules, the others at their measured times; $(grep '^profile step' <<<"$now" | cut -c15-150)"
else
  echo "FAIL params profile --learn $record: changed rows '$changed', rows off their measured time '$kept', sum check '$sum_ok', step line '$(grep '^profile step' <<<"$now")'"; fail=1
fi
echo "params profile checks took $((SECONDS - t0)) s"

[ -f "$spec" ] || echo "SKIP params cross-check against VARIANTS.md: $spec not found beside the repository (the transcribed numbers above were still checked)"
exit $fail
