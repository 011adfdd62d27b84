#!/usr/bin/env bash
# The serving benchmark on one GPU at the MiniMax-M2.7 shape: `m2cpp serve
# --device cuda` with dummy weights (LAYERS of the 62 real layers, 30 fit one
# H200 in FP8), driven by `m2cpp bench serve` on the same machine at 1K/1K
# over concurrency 1, 4, 16, 64 (one request per slot per level). Writes the
# benchmark's JSON / SVG and the server log to $OUT. Carry build-gpu/m2cpp and
# build-gpu/lib (see scripts/gpu_check.sh --prepare).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
LAYERS=${LAYERS:-30}
LEVELS=${LEVELS:-1,4,16,64}
OUT=${OUT:-/tmp/gpu_serve_out}
PORT=8123
mkdir -p "$OUT"
LIBPATH=$PWD/$BUILD/lib
for dir in /usr/local/cuda/lib64 $(find /usr /opt -name 'libcublasLt.so.13*' -printf '%h\n' 2>/dev/null | sort -u | head -3); do
  [[ -e "$dir/libcublasLt.so.13" ]] && LIBPATH=$LIBPATH:$dir
done
export LD_LIBRARY_PATH=$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# A model directory: the real config, and a tokenizer covering the 200K
# vocabulary (it only detokenizes the outputs: the benchmark sends token-id
# prompts). TOKENIZER_DIR: e.g. the shared m2-layout stand-in, carried.
TOKENIZER_DIR=${TOKENIZER_DIR:-.gpu_carry/m2-layout}
MODEL=/tmp/m2.7-dummy
mkdir -p "$MODEL"
cp configs/minimax-m2.7.json "$MODEL/config.json"
cp "$TOKENIZER_DIR/tokenizer.json" "$TOKENIZER_DIR/tokenizer_config.json" "$MODEL/"

"$BUILD/m2cpp" serve -m "$MODEL" --load-format dummy --num-layers "$LAYERS" --device cuda --port "$PORT" \
  --kv-cache-memory $((24 << 30)) --max-num-seqs 64 --max-num-batched-tokens 4096 --disable-access-log \
  > "$OUT/serve.log" 2>&1 &
SERVER=$!
ready=0
for _ in $(seq 1 300); do
  if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=2)" 2>/dev/null; then
    ready=1
    break
  fi
  kill -0 $SERVER 2>/dev/null || break
  sleep 1
done
echo "server ready=$ready after ${SECONDS}s"
if [[ $ready == 1 ]]; then
  # SIGINT after BENCH_S seconds: the benchmark then writes what it measured so far.
  timeout -s INT "${BENCH_S:-480}" "$BUILD/m2cpp" bench serve --base-url "http://127.0.0.1:$PORT" --input-len 1024 --output-len 1024 \
    --concurrency "$LEVELS" --prompts-per-concurrency 1 --warmup 1 --gpus 1 --seed 1 --no-progress \
    --label "m2cpp, 1x H200, M2.7 shape ($LAYERS layers, FP8, dummy weights)" --out "$OUT/h200-m27-${LAYERS}l" \
    2>&1 | tee "$OUT/bench.txt"
fi
kill -INT $SERVER 2>/dev/null
wait $SERVER
tail -20 "$OUT/serve.log"
echo "done after ${SECONDS}s"
