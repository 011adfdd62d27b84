#!/usr/bin/env bash
# The many-GPU run (issues 26-28) in one command on a machine of N GPUs (the
# device tool's nvidia-h200-x2/x4/x8): everything tensor parallelism needs
# measured, ending with a short table in $OUT/summary.txt.
#   1. the machine and how its GPUs are linked (nvidia-smi topo -m);
#   2. the tensor-parallel GPU tests with the ranks spread over the GPUs
#      (rank r on GPU r mod N: the peer-to-peer collectives across real links);
#   3. `m2cpp bench allreduce -tp N`: the peer-to-peer one-shot kernel (eager
#      and graph-replayed) and the host-staged fallback, 8 KB - 64 MB;
#   4. greedy ids of a dummy M2.7 model of LAYERS layers over 64 steps at
#      tp N against tp 2 (the same logical weights: dummy FP8 generated on
#      each GPU from the tensor's element indices), routed freely and under
#      tp 2's routing (scripts/gpu_tp_greedy.sh);
#   5. `m2cpp bench decode -tp N` at batch 1, 64 and 256, 1K context.
# Carry build-gpu (scripts/gpu_check.sh --prepare). NVLink multicast stays off
# (NCCL_NVLS_ENABLE=0: on the shared machines it can take GPUs out of service).
#
#   TP=4 LAYERS=62 scripts/gpu_multi.sh     (defaults: TP = the GPUs there are, LAYERS 62)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/gpu_multi_out}
BUDGET=${BUDGET:-570}
export NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "[gpu_multi +${SECONDS}s] $*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - SECONDS)); }
GPUS=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
TP=${TP:-$GPUS}
LAYERS=${LAYERS:-62}
nvidia-smi > "$OUT/machine.txt" 2>&1
nvidia-smi topo -m >> "$OUT/machine.txt" 2>&1
free -g >> "$OUT/machine.txt" 2>&1
note "$GPUS GPU(s): $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | head -1); tp $TP, $LAYERS layers"
source "$ROOT/scripts/gpu_libs.sh"
LDP="LD_LIBRARY_PATH=$(gpu_library_path "$ROOT/$BUILD")"
export M2CPP_SOURCE_DIR=$ROOT
run() {  # SECONDS CMD...
  local limit=$1
  shift
  timeout $(( limit > 10 ? limit : 10 )) env "$LDP" "$@"
}
M27=(-m configs/minimax-m2.7.json --load-format dummy --num-layers "$LAYERS" --device cuda)

# 2. Tests.
if run 240 "$BUILD/test_backend_cuda" --gtest_color=no \
    --gtest_filter='*CudaTensorParallel*:*PeerCommunicator*' > "$OUT/tests.log" 2>&1; then
  note "tests: pass ($(grep -c '^\[       OK' "$OUT/tests.log") tests)"
else
  note "tests: FAIL (tests.log)"; grep -E '^\[  FAILED|Failure' "$OUT/tests.log" | head -10 | tee -a "$SUMMARY"
fi

# 3. All-reduce microbenchmark.
if (( TP >= 2 )); then
  run 180 "$BUILD/m2cpp" bench allreduce -tp "$TP" --json "$OUT/allreduce.json" > "$OUT/allreduce.log" 2>&1 ||
    note "bench allreduce failed (allreduce.log)"
  sed -n '1,3p' "$OUT/allreduce.log" | tee -a "$SUMMARY"
  grep -E '^ +(12288|16384|65536|1048576|67108864) ' "$OUT/allreduce.log" | tee -a "$SUMMARY"
fi

# 4. Greedy ids at tp N against tp 2, free and under tp 2's routing (scripts/gpu_tp_greedy.sh).
if (( TP > 2 )) && (( $(left) > 200 )); then
  BUILD=$BUILD OUT=$OUT/tp_greedy TP=$TP BASE=2 LAYERS=$LAYERS LIMIT=$(( $(left) / 8 )) \
    run $(( $(left) - 60 )) scripts/gpu_tp_greedy.sh 2>&1 | tee -a "$SUMMARY"
fi

# 5. Decode.
for batch in 1 64 256; do
  (( $(left) < 60 )) && { note "out of time before batch $batch"; break; }
  run $(( $(left) - 20 )) "$BUILD/m2cpp" bench decode "${M27[@]}" -tp "$TP" --kv-dtype bf16 --context 1024 \
    --tokens 32 --batch "$batch" --kv-cache-memory $(( 8 << 30 )) --json "$OUT/decode_b$batch.json" > "$OUT/decode_b$batch.log" 2>&1 ||
    note "decode batch $batch failed (decode_b$batch.log)"
  grep -iE 'ms/token|tok/s' "$OUT/decode_b$batch.log" | tail -2 | sed "s/^/batch $batch: /" | tee -a "$SUMMARY"
done
note "done"
