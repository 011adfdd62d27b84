#!/usr/bin/env bash
# Greedy ids of a dummy M2.7-shape model (LAYERS layers, 64 steps) at -tp TP
# against -tp BASE on the GPUs there are (one H200: the ranks share it), the
# many-GPU issue's "the sharded forward equals the unsharded one":
#   free:   both runs route by their own router. On dummy weights the 8th and
#           9th expert scores are often within fp32 reassociation of each
#           other, so one flipped choice parts the runs (s20 run 61): stated,
#           not required.
#   replay: TP runs under BASE's routing (m2cpp generate --routing-capture /
#           --routing-replay), which separates the sharding from the router's
#           near-ties: its ids must equal BASE's, with FP8 activations (W8A8,
#           the default) and without them (fp8_gemm=off, W8A32).
#   control: BASE again with its fp32 sums reassociated another way
#           (batch_invariant=on), under the same routing: how far a change of
#           summation order alone moves this model's greedy ids.
#   logits: every position's logits of the prompt + BASE's ids under BASE's
#           routing (m2cpp logits --routing-replay), sharded and control
#           against BASE: the largest difference, the positions whose argmax
#           differs and BASE's top-1/top-2 gap there.
# Exit 0 when both replayed comparisons hold. Called by gpu_check.sh (TP 2,
# BASE 1, 30 layers) and gpu_multi.sh; alone:
#   BUILD=build-gpu OUT=dir TP=2 BASE=1 LAYERS=30 scripts/gpu_tp_greedy.sh
# (LD_LIBRARY_PATH as gpu_libs.sh sets it).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/gpu_tp_greedy_out}
TP=${TP:-2} BASE=${BASE:-1} LAYERS=${LAYERS:-30} LIMIT=${LIMIT:-240}
mkdir -p "$OUT"
# Rank r on GPU r mod the GPUs there are (one GPU: every rank shares it).
GPUS=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
if (( GPUS < TP )); then
  export M2CPP_TP_DEVICES=$(for ((r = 0; r < TP; ++r)); do echo $((r % (GPUS > 0 ? GPUS : 1))); done | paste -sd,)
fi
IDS=$(seq -s, 101 37 1288)  # 33 fixed prompt ids
M27=(generate -m configs/minimax-m2.7.json --load-format dummy --num-layers "$LAYERS" --device cuda --kv-dtype bf16
     --ids "$IDS" --max-tokens 64 --ignore-eos --json)
gen() {  # NAME TP EXTRA...: prints the ids line
  local name=$1 tp=$2
  shift 2
  timeout "$LIMIT" "$BUILD/m2cpp" "${M27[@]}" -tp "$tp" "$@" 2> "$OUT/$name.log" | tail -1
}
same_from() {  # A B: the first step where two {"ids": [...]} lines differ (64: none)
  python3 -c "
import json, sys
try:
    a, b = json.loads(sys.argv[1])['ids'], json.loads(sys.argv[2])['ids']
except Exception:
    print(-1); sys.exit()
print(next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))))" "$1" "$2"
}
logits_at() {  # NAME TP IDS ROUTING OPTIONS...: every position's logits under ROUTING
  local name=$1 tp=$2 ids=$3 routing=$4
  shift 4
  timeout "$LIMIT" "$BUILD/m2cpp" logits -m configs/minimax-m2.7.json --load-format dummy --num-layers "$LAYERS" \
    --device cuda --kv-dtype bf16 --ids "$ids" -tp "$tp" --routing-replay "$routing" "$@" \
    --out "$OUT/$name.npy" > "$OUT/$name.log" 2>&1
}
differences() {  # A.npy B.npy LABEL: the largest logit difference, the argmax that part and BASE's gap there
  python3 - "$@" <<'PY'
import sys, numpy as np
try:
    a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
except Exception as e:
    print("  logits,", sys.argv[3], ": FAILED", e); sys.exit()
top = np.sort(a, axis=-1)[:, -2:]
gap = top[:, 1] - top[:, 0]
bad = np.nonzero(a.argmax(-1) != b.argmax(-1))[0]
print("  logits,", sys.argv[3], f"({a.shape[0]} positions): max |diff| {np.abs(a - b).max():.3g} (max |logit| {np.abs(a).max():.3g});",
      f"argmax differs at {len(bad)}" + (":" if len(bad) else ""),
      ", ".join(f"{p} (gap {gap[p]:.2g}, |diff| {np.abs(a[p] - b[p]).max():.2g})" for p in bad[:6]))
PY
}
ok=0
for numerics in w8a8 w8a32; do
  opt=fp8_gemm=cublaslt; [[ $numerics == w8a32 ]] && opt=fp8_gemm=off
  routing=$OUT/routing_${numerics}_tp$BASE.bin
  base=$(gen "${numerics}_tp$BASE" "$BASE" --cuda-options "$opt" --routing-capture "$routing")
  free=$(gen "${numerics}_tp${TP}_free" "$TP" --cuda-options "$opt")
  replay=$(gen "${numerics}_tp${TP}_replay" "$TP" --cuda-options "$opt" --routing-replay "$routing")
  # The control: tp BASE itself with its sums reassociated (batch_invariant=on:
  # other kernels and split points, the same math), under the same routing.
  control=$(gen "${numerics}_tp${BASE}_control" "$BASE" --cuda-options "$opt,batch_invariant=on" --routing-replay "$routing")
  f=$(same_from "$base" "$free") r=$(same_from "$base" "$replay") c=$(same_from "$base" "$control")
  verdict=ok; [[ "$r" == 64 ]] || { verdict=FAIL; ok=1; }
  echo "greedy ids, $LAYERS layers, 64 steps, $numerics: tp $TP under tp $BASE's routing: $verdict" \
       "(identical for $r steps); routed freely: $f steps; control (tp $BASE, batch_invariant=on, replayed): $c steps"
  # Teacher-forced: the prompt and BASE's ids but the last (the rows the routing covers).
  forced=$IDS,$(python3 -c "import json,sys; print(','.join(map(str, json.loads(sys.argv[1])['ids'][:-1])))" "$base" 2>/dev/null)
  logits_at base "$BASE" "$forced" "$routing" --cuda-options "$opt"
  logits_at sharded "$TP" "$forced" "$routing" --cuda-options "$opt"
  logits_at control "$BASE" "$forced" "$routing" --cuda-options "$opt,batch_invariant=on"
  differences "$OUT/base.npy" "$OUT/sharded.npy" "$numerics, tp $TP vs tp $BASE under its routing"
  differences "$OUT/base.npy" "$OUT/control.npy" "$numerics, control vs tp $BASE"
  rm -f "$OUT"/base.npy "$OUT"/sharded.npy "$OUT"/control.npy
done
exit $ok
