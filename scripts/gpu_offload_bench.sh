#!/usr/bin/env bash
# Issue 22's figures on one H200 in one command: the whole 62-layer M2.7
# shape (dummy FP8 weights) with `--n-cpu-moe auto`, as `m2cpp bench decode`
# (batch 1 at 1K and 32K context with the offload ceiling and the CPU/GPU
# time split, batches 8 and 32, prefill of 2K, 8K and 32K tokens) and as
# `m2cpp serve` under `m2cpp bench serve` (1K in, OUTPUT_LEN out, concurrency
# LEVELS). Each bench decode loads the model (~60 s with 2 MiB pages), so the
# whole run takes ~12 minutes: split it with ONLY="decode" / ONLY="serve".
# Logs in $OUT (offload_*.log, the serve case's files); one summary line per
# figure in $OUT/offload_summary.txt. Carry build-gpu/m2cpp, build-gpu/lib and
# the tokenizer (scripts/gpu_check.sh --prepare; TOKENIZER_DIR as for
# scripts/gpu_serve_case.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/gpu_offload_out}
LEVELS=${LEVELS:-1,4,16}
OUTPUT_LEN=${OUTPUT_LEN:-1024}
mkdir -p "$OUT"
source scripts/gpu_libs.sh
LDP=$(gpu_library_path "$PWD/$BUILD")
M=configs/minimax-m2.7.json
SUMMARY=$OUT/offload_summary.txt

decode() {  # NAME LIMIT_S ARGS...: one bench decode of the whole model
  local name=$1 limit=$2
  shift 2
  env LD_LIBRARY_PATH="$LDP" timeout "$limit" "$BUILD/m2cpp" bench decode -m "$M" --load-format dummy --device cuda \
    --n-cpu-moe auto --kv-dtype bf16 "$@" > "$OUT/offload_$name.log" 2>&1
  echo "== $name (rc $?): $*" | tee -a "$SUMMARY"
  grep -E "^(prefill|decode|ceiling|host experts|time split)" "$OUT/offload_$name.log" | tee -a "$SUMMARY"
}

if [[ "${ONLY:-}" != serve ]]; then
  decode b1_1k 200 --context 1024 --tokens 32
  decode b1_32k 300 --context 32768 --prefill-chunk 8192 --tokens 16
  decode b8 200 --batch 8 --context 1024 --tokens 16
  decode b32 200 --batch 32 --context 1024 --tokens 8
  decode prefill_2k 200 --context 2048 --prefill-chunk 2048 --tokens 2
  decode prefill_8k 200 --context 8192 --prefill-chunk 8192 --tokens 2
fi
if [[ "${ONLY:-}" != decode ]]; then
  LAYERS=62 OUT=$OUT scripts/gpu_serve_case.sh offload_serve "${SERVE_S:-900}" \
    "--n-cpu-moe auto --gpu-memory-utilization 0.9 --max-model-len $((1024 + OUTPUT_LEN + 64)) --max-num-seqs 16 --max-num-batched-tokens 8192" \
    "--input-len 1024 --output-len $OUTPUT_LEN --concurrency $LEVELS --prompts-per-concurrency 1" | tee -a "$SUMMARY"
fi
