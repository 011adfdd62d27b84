#!/usr/bin/env bash
# The serving benchmark on one GPU at the MiniMax-M2.7 shape: `m2cpp serve
# --device cuda` with dummy weights (LAYERS of the 62 real layers, 30 fit one
# H200 in FP8), driven by `m2cpp bench serve` on the same machine at 1K/1K
# over concurrency 1, 4, 16, 64 (one request per slot per level), as one
# scripts/gpu_serve_case.sh case. Writes the benchmark's JSON / SVG
# ($OUT/h200-m27-<LAYERS>l.*) and the server log to $OUT. Carry
# build-gpu/m2cpp and build-gpu/lib (see scripts/gpu_check.sh --prepare).
set -uo pipefail
cd "$(dirname "$0")/.."
LAYERS=${LAYERS:-30}
LEVELS=${LEVELS:-1,4,16,64}
export LAYERS LABEL="m2cpp, 1x H200, M2.7 shape ($LAYERS layers, FP8, dummy weights)"
exec scripts/gpu_serve_case.sh "h200-m27-${LAYERS}l" "${BENCH_S:-480}" \
  "--kv-cache-memory $((24 << 30)) --max-num-seqs 64 --max-num-batched-tokens 4096" \
  "--input-len 1024 --output-len 1024 --concurrency $LEVELS --prompts-per-concurrency 1 --warmup 1"
