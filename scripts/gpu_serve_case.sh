#!/usr/bin/env bash
# One serving case on the GPU machine: `m2cpp serve --device cuda` on dummy
# weights of the M2.7 shape, driven by `m2cpp bench serve` on loopback, and
# whether the server outlived it. For reproducing load-dependent failures
# (issue 29) and for the soak (scripts/gpu_soak.sh).
#
#   scripts/gpu_serve_case.sh NAME SECONDS "SERVE ARGS" "BENCH ARGS"
#
# Env: DRIVER=soak runs tools/gpu_soak.py (BENCH ARGS are its flags)
# instead of bench serve; DRIVER=cmd runs BENCH ARGS as a shell command with
# URL set to the server's; LAYERS (default 30), WRAP (a prefix for the server, e.g.
# "compute-sanitizer --tool memcheck"), GLOBAL_ARGS (m2cpp's own before `serve`, e.g. -v), LABEL (bench serve's --label), SERVER_ENV ("VAR=v ..." for the
# server only), BUILD (default build-gpu), TOKENIZER_DIR (default
# .gpu_carry/m2-layout, carried). Logs: $OUT/NAME.serve.log, NAME.bench.txt;
# one line "case NAME: server alive|died ..." is printed and appended to
# $OUT/cases.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
NAME=$1 LIMIT=$2 SERVE_ARGS=$3 BENCH_ARGS=$4
BUILD=${BUILD:-build-gpu}
LAYERS=${LAYERS:-30}
OUT=${OUT:-/tmp/gpu_serve_out}
PORT=${PORT:-8123}
mkdir -p "$OUT"
source scripts/gpu_libs.sh
LDP=$(gpu_library_path "$PWD/$BUILD")

TOKENIZER_DIR=${TOKENIZER_DIR:-.gpu_carry/m2-layout}
MODEL=/tmp/m2.7-dummy
mkdir -p "$MODEL"
cp configs/minimax-m2.7.json "$MODEL/config.json"
cp "$TOKENIZER_DIR/tokenizer.json" "$TOKENIZER_DIR/tokenizer_config.json" "$MODEL/"

start=$SECONDS
# shellcheck disable=SC2086
env LD_LIBRARY_PATH="$LDP" ${SERVER_ENV:-} ${WRAP:-} "$BUILD/m2cpp" ${GLOBAL_ARGS:-} serve -m "$MODEL" --load-format dummy \
  --num-layers "$LAYERS" --device cuda --port "$PORT" --disable-access-log $SERVE_ARGS > "$OUT/$NAME.serve.log" 2>&1 &
SERVER=$!
ready=0
for _ in $(seq 1 400); do
  if curl -sf -m 2 "http://127.0.0.1:$PORT/health" > /dev/null 2>&1 ||
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=2)" 2>/dev/null; then
    ready=1
    break
  fi
  kill -0 $SERVER 2>/dev/null || break
  sleep 0.5
done
load_s=$((SECONDS - start))
if [[ $ready == 1 && "${DRIVER:-bench}" == soak ]]; then
  # shellcheck disable=SC2086
  timeout -s INT "$LIMIT" python3 tools/gpu_soak.py --url "http://127.0.0.1:$PORT" --total-s $((LIMIT - 60)) \
    --json "$OUT/$NAME.json" $BENCH_ARGS > "$OUT/$NAME.bench.txt" 2>&1
  brc=$?
elif [[ $ready == 1 && "${DRIVER:-bench}" == cmd ]]; then
  timeout -s INT "$LIMIT" env URL="http://127.0.0.1:$PORT" bash -c "$BENCH_ARGS" > "$OUT/$NAME.bench.txt" 2>&1
  brc=$?
elif [[ $ready == 1 ]]; then
  # shellcheck disable=SC2086
  timeout -s INT "$LIMIT" env LD_LIBRARY_PATH="$LDP" "$BUILD/m2cpp" bench serve --base-url "http://127.0.0.1:$PORT" \
    --gpus 1 --seed 1 --no-progress --out "$OUT/$NAME" ${LABEL:+--label "$LABEL"} $BENCH_ARGS > "$OUT/$NAME.bench.txt" 2>&1
  brc=$?
else
  brc=-1
fi
if kill -0 $SERVER 2>/dev/null; then state=alive; else state=died; fi
# The server's counters after the load (KV blocks in use should be back to 0).
curl -sf -m 5 "http://127.0.0.1:$PORT/metrics" > "$OUT/$NAME.metrics" 2>/dev/null
kv=$(awk '/^m2cpp:kv_cache_blocks_used /{print $2}' "$OUT/$NAME.metrics" 2>/dev/null)
pre=$(awk '/^m2cpp:num_preemptions_total /{print $2}' "$OUT/$NAME.metrics" 2>/dev/null)
kill -INT $SERVER 2>/dev/null
for _ in $(seq 1 60); do kill -0 $SERVER 2>/dev/null || break; sleep 0.5; done
kill -KILL $SERVER 2>/dev/null
wait $SERVER 2>/dev/null
line="case $NAME: server $state (ready=$ready after ${load_s}s, bench rc $brc, $((SECONDS - start))s, KV blocks used after: ${kv:-?}, preemptions: ${pre:-?})"
echo "$line" | tee -a "$OUT/cases.txt"
grep -E 'error|CUDA|abort|FATAL|illegal|Invalid|=========' "$OUT/$NAME.serve.log" | head -30
tail -12 "$OUT/$NAME.bench.txt"
