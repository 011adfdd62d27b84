#!/usr/bin/env bash
# The CUDA backend's whole GPU check in one run, ending with a short table:
#   1. the machine (nvidia-smi), and binaries that start (carried, else built here);
#   2. the CUDA tests (every op against the CPU backend, the whole model
#      against the float64 reference fixtures and the CPU backend, 32K context);
#   3. the microbenchmarks beside the ceilings measured in the same run;
#      (BENCH_ARGS=--quick: the decode-size rows only)
#   4. `m2cpp bench decode --device cuda` on dummy weights at the real M2.7
#      shape with as many layers as fit (LAYERS, default 30; 8 if that fails);
#      A/B reruns with an environment variable set: DECODE_VARIANTS (batch 1),
#      BATCH_VARIANTS (batches and prefill), e.g. "M2CPP_CUDA_OPTIONS=moe_cutlass=off".
#   (TIMELINE=1: also where a batch-1 step's time goes, kernel by kernel with
#    their real overlap: CUPTI records, tools/cuda_timeline; see 3d below)
#   (CUTLASS_BENCH=1: also bench/cutlass_moe_bench.cu, CUTLASS's grouped FP8
#    GEMM against our MoE kernel; --prepare then builds it too, which needs
#    the nvidia-cutlass headers that scripts/setup.sh installs; they also put
#    the backend's grouped MoE on CUTLASS, CMake M2CPP_CUTLASS)
# Full logs go to $OUT (the device tool's output folder; /tmp/gpu_check_out otherwise).
#
#   scripts/gpu_check.sh --prepare   on a build machine (no GPU needed): configure
#                                    and build build-gpu/ for sm_90a and copy the
#                                    shared libraries the binaries need into
#                                    build-gpu/lib/ (carry build-gpu to the GPU)
#   scripts/gpu_check.sh             on the GPU machine
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build-gpu}
LAYERS=${LAYERS:-30}
BUDGET=${BUDGET:-570}  # seconds for the whole run (the device tool allows 600)

if [[ "${1:-}" == "--prepare" ]]; then
  set -e
  TARGETS=(m2cpp test_backend_cuda test_backend test_model cuda_kernels_bench)
  [[ "${CUTLASS_BENCH:-}" == 1 ]] && TARGETS+=(cutlass_moe_bench)
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DM2CPP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real \
    -DCMAKE_BUILD_RPATH='$ORIGIN/lib' -DM2CPP_CUTLASS_BENCH=$([[ "${CUTLASS_BENCH:-}" == 1 ]] && echo ON || echo OFF) > /dev/null
  # The CUPTI timeline library (TIMELINE=1), where the toolkit has CUPTI.
  if ninja -C "$BUILD" -t targets all 2>/dev/null | grep -q '^m2cpp_timeline:'; then TARGETS+=(m2cpp_timeline); fi
  cmake --build "$BUILD" -j "${JOBS:-2}" --target "${TARGETS[@]}"
  # Everything the binaries load that a CUDA image lacks: not glibc, not the
  # C++ runtime (the GPU machine's is as new; ours needs a newer glibc), not
  # CUDA's own (cuBLASLt is ~500 MB: it is found on the GPU machine, below).
  rm -rf "$BUILD/lib"
  mkdir -p "$BUILD/lib"
  for bin in "${TARGETS[@]}"; do
    [[ "$bin" == m2cpp_timeline ]] && bin=libm2cpp_timeline.so
    ldd "$BUILD/$bin" | awk '/=> \//{print $3}'
  done | sort -u | grep -vE '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|libcublas|libcudart' |
    while read -r lib; do cp -L "$lib" "$BUILD/lib/"; done
  du -sh "$BUILD/lib" "$BUILD/m2cpp" "$BUILD/test_backend_cuda" "$BUILD/test_backend" "$BUILD/test_model" "$BUILD/cuda_kernels_bench"
  exit 0
fi

OUT=${OUT:-/tmp/gpu_check_out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "[gpu_check +${SECONDS}s] $*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - SECONDS)); }

nvidia-smi > "$OUT/machine.txt" 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv >> "$OUT/machine.txt" 2>&1
free -g >> "$OUT/machine.txt" 2>&1
nproc >> "$OUT/machine.txt" 2>&1
note "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"

# Shared libraries: the carried ones, then cuBLASLt (scripts/gpu_libs.sh).
source "$ROOT/scripts/gpu_libs.sh"
LDP="LD_LIBRARY_PATH=$(gpu_library_path "$ROOT/$BUILD")"
echo "$LDP" >> "$OUT/machine.txt"
export M2CPP_SOURCE_DIR=$ROOT  # the tests' fixtures, wherever this checkout is
# run SECONDS CMD...: CMD with our libraries, stopped after SECONDS (at least 10).
run() {
  local limit=$1
  shift
  timeout $(( limit > 10 ? limit : 10 )) env "$LDP" M2CPP_CUDA_OPTIONS="${M2CPP_CUDA_OPTIONS:-}" "$@"
}

# 1. Binaries: carried, or built here.
if ! run 60 "$BUILD/test_backend_cuda" --gtest_list_tests > /dev/null 2> "$OUT/build.log"; then
  note "carried binaries do not start (see build.log); building here"
  env "$LDP" ldd "$BUILD/test_backend_cuda" >> "$OUT/build.log" 2>&1
  BUILD=build-gpu-here
  if cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DM2CPP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real \
      >> "$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD" -j "$(nproc)" --target m2cpp test_backend_cuda cuda_kernels_bench >> "$OUT/build.log" 2>&1; then
    note "built here"
  else
    note "the build here failed (tail of build.log below)"
    tail -20 "$OUT/build.log" | tee -a "$SUMMARY"
  fi
fi

# 2. Tests: ops, the FP8 tensor-core paths, attention, then the whole model (a
# crash in one part leaves the others their run); every op synchronised so
# that a failing kernel is named.
TESTS=pass
: > "$OUT/tests.log"
[[ -n "${SKIP_TESTS:-}" ]] && TESTS=skipped
# (the decode attention tests in two runs: ~60 s each, their CPU references)
for filter in 'Ops.*:CudaBackend.*:Fused*' 'Fp8Gemm.*:Bf16Gemm.*' 'CudaAttention.*-CudaAttention.Decode*' \
  'CudaAttention.DecodeBatchMatchesCpu:CudaAttention.DecodeBatchOnSimt*' 'CudaAttention.DecodeBatchOnTensorCores*' \
  'Sampling.*' '*Model*:CudaGraphs.*' 'HostExperts*' '*CudaTensorParallel*:*PeerCommunicator*'; do
  [[ -n "${SKIP_TESTS:-}" ]] && break
  M2CPP_CUDA_OPTIONS=sync=on run 110 "$BUILD/test_backend_cuda" --gtest_color=no --gtest_filter="$filter" >> "$OUT/tests.log" 2>&1 ||
    TESTS=fail
done
# The suites written once for every backend, on the CUDA one: the op
# conformance suite (tests/backend/ops_conformance_test.cpp, each kernel
# variant) and the whole-model reference tests (tests/model/reference_test.cpp).
if [[ -z "${SKIP_TESTS:-}" ]]; then
  M2CPP_CUDA_OPTIONS=sync=on run 150 "$BUILD/test_backend" --gtest_color=no --gtest_filter='Devices/*' >> "$OUT/tests.log" 2>&1 ||
    TESTS=fail
  M2CPP_CUDA_OPTIONS=sync=on run 110 "$BUILD/test_model" --gtest_color=no --gtest_filter='*cuda*' >> "$OUT/tests.log" 2>&1 ||
    TESTS=fail
fi
# Random engine-like step mixes against the CPU backend, the W8A8 paths
# against their float64 reference and batch invariance (bit for bit), with
# graphs on (as a server runs: sync=on would turn them off).
if [[ -z "${SKIP_TESTS:-}" ]]; then
  M2CPP_CUDA_OPTIONS= run 200 "$BUILD/test_backend_cuda" --gtest_color=no \
    --gtest_filter='Kv/StepMix.*:Paths/W8A8.*:Kv/BatchInvariance.*' >> "$OUT/tests.log" 2>&1 ||
    TESTS=fail
fi
# GPU ranks across nodes: two processes on this GPU (scripts/gpu_nodes_check.sh).
if [[ -z "${SKIP_TESTS:-}" ]]; then
  BUILD=$BUILD OUT=$OUT/nodes run 300 scripts/gpu_nodes_check.sh >> "$OUT/tests.log" 2>&1 || TESTS=fail
  grep -E 'over 2 nodes' "$OUT/tests.log" | tee -a "$SUMMARY"
fi
# Two ranks sharing this GPU against one, 30 layers of the M2.7 shape, 64
# greedy steps under the same routing (scripts/gpu_tp_greedy.sh).
if [[ -z "${SKIP_TESTS:-}" ]] && (( $(left) > 300 )); then
  BUILD=$BUILD OUT=$OUT/tp_greedy TP=2 BASE=1 LAYERS=$LAYERS run 200 scripts/gpu_tp_greedy.sh >> "$OUT/tests.log" 2>&1 ||
    TESTS=fail
  grep -E '^greedy ids' "$OUT/tests.log" | tee -a "$SUMMARY"
fi
note "tests: $TESTS: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]|Failure|CUDA error' "$OUT/tests.log" | head -20 | tee -a "$SUMMARY"

# 3. Microbenchmarks.
if [[ -z "${SKIP_BENCH:-}" ]]; then
  run $(( $(left) > 330 ? ${BENCH_SECONDS:-130} : 60 )) "$BUILD/cuda_kernels_bench" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  rc=$?
  (( rc == 0 )) || note "microbenchmarks stopped early (rc $rc)"
fi

# 3a. CUTLASS's grouped FP8 GEMM (blockwise scales) against our MoE kernel at
# the M2 MoE shapes (CUTLASS_BENCH=1; built by --prepare with CUTLASS_BENCH=1).
if [[ "${CUTLASS_BENCH:-}" == 1 ]]; then
  if [[ -x "$BUILD/cutlass_moe_bench" ]]; then
    run 240 "$BUILD/cutlass_moe_bench" ${CUTLASS_BENCH_ARGS:-} > "$OUT/cutlass_moe.log" 2>&1 ||
      note "cutlass_moe_bench failed (rc $?)"
    grep -E 'FAIL|error' "$OUT/cutlass_moe.log" | head -5 | tee -a "$SUMMARY"
  else
    note "CUTLASS_BENCH=1 but no $BUILD/cutlass_moe_bench (prepare with CUTLASS_BENCH=1)"
  fi
fi

# 3b. Where a decode step's GPU time goes (PROFILE=1): the per-op table of
# M2CPP_CUDA_OPTIONS=profile=on (no graphs) for batch 1 and 64 on a few layers.
if [[ -n "${PROFILE:-}" ]]; then
  for batch in 1 64; do
    echo "== batch $batch" >> "$OUT/profile.log"
    M2CPP_CUDA_OPTIONS=profile=on run 120 "$BUILD/m2cpp" bench decode -m configs/minimax-m2.7.json --load-format dummy \
      --num-layers "${PROFILE_LAYERS:-4}" --device cuda --kv-dtype bf16 --context 1024 --tokens 16 \
      $( ((batch > 1)) && echo --batch $batch) >> "$OUT/profile.log" 2>&1 || note "profile at batch $batch failed"
  done
fi

# 3c. Every kernel of decode steps under Nsight Compute (NCU=1, when the
# image has ncu): GPU time, DRAM bytes and occupancy per launch, for batch 1
# and 64 on 2 layers, without graphs (not the kernels that generate the dummy
# weights on the GPU). ncu_summary.txt: one line per kernel;
# NCU_DETAIL=REGEX (with or without NCU=1): ncu_detail.txt, the stall reasons
# of those kernels.
NCU_BIN=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
if [[ -n "${NCU:-}${NCU_DETAIL:-}" && -n "$NCU_BIN" ]]; then
  for batch in $([[ -n "${NCU:-}" ]] && echo 1 64); do
    M2CPP_CUDA_OPTIONS=graphs=off run 200 "$NCU_BIN" --cache-control none --clock-control none --csv --print-units base \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
      -k "regex:^(?!fill_dummy)" -c "${NCU_KERNELS:-400}" "$BUILD/m2cpp" bench decode -m configs/minimax-m2.7.json --load-format dummy --num-layers 2 \
      --device cuda --kv-dtype bf16 --context 1024 --prefill-chunk 1024 --tokens 3 \
      $( ((batch > 1)) && echo --batch $batch) > "$OUT/ncu_b$batch.csv" 2> "$OUT/ncu_b$batch.err" ||
      note "ncu at batch $batch failed (rc $?)"
    python3 "$ROOT/scripts/ncu_summary.py" "$OUT/ncu_b$batch.csv" >> "$OUT/ncu_summary.txt" 2>&1
  done
  # Why the latency-bound kernels take as long as they do (NCU_DETAIL: a
  # kernel-name regex, e.g. "route_kernel|attention_decode"): warp stall
  # reasons, issue and occupancy of one batch-1 decode step's launches.
  if [[ -n "${NCU_DETAIL:-}" ]]; then
    M2CPP_CUDA_OPTIONS=graphs=off run 200 "$NCU_BIN" --cache-control none --clock-control none --section SpeedOfLight \
      --section WarpStateStats --section SchedulerStats --section Occupancy -k "regex:$NCU_DETAIL" --launch-skip 10 \
      -c "${NCU_DETAIL_KERNELS:-8}" "$BUILD/m2cpp" bench decode -m configs/minimax-m2.7.json --load-format dummy \
      --num-layers 1 --device cuda --kv-dtype bf16 --context 1024 --prefill-chunk 1024 --tokens 3 \
      > "$OUT/ncu_detail.txt" 2>&1 || note "ncu details failed (rc $?)"
  fi
fi

# 3d. Where a batch-1 decode step's wall time goes, with the kernels' real
# overlap (TIMELINE=1): every kernel's GPU start and end from CUPTI
# (tools/cuda_timeline, injected with CUDA_INJECTION64_PATH) over
# TIMELINE_LAYERS (default 4) layers, then scripts/timeline_summary.py: per
# kernel, its exposed microseconds per step. TIMELINE_VARIANTS="VAR=value ..."
# repeats it with each variable set. (Timed under CUPTI's tracing.)
if [[ -n "${TIMELINE:-}" ]]; then
  if [[ -e "$BUILD/libm2cpp_timeline.so" ]]; then
    : > "$OUT/timeline.txt"
    for v in default ${TIMELINE_VARIANTS:-}; do
      tag=${v//[^A-Za-z0-9_]/_}
      (
        [[ "$v" != default ]] && export "$v"
        export CUDA_INJECTION64_PATH="$ROOT/$BUILD/libm2cpp_timeline.so" M2CPP_TIMELINE_OUT="$OUT/timeline_$tag.csv"
        run 120 "$BUILD/m2cpp" bench decode -m configs/minimax-m2.7.json --load-format dummy \
          --num-layers "${TIMELINE_LAYERS:-4}" --device cuda --kv-dtype bf16 --context 1024 --tokens 16
      ) > "$OUT/timeline_$tag.log" 2>&1 || note "timeline $v failed (rc $?, timeline_$tag.log)"
      { echo "== timeline ($v)"; python3 "$ROOT/scripts/timeline_summary.py" "$OUT/timeline_$tag.csv" --top 20; } \
        >> "$OUT/timeline.txt" 2>&1
    done
    tee -a "$SUMMARY" < "$OUT/timeline.txt"
  else
    note "TIMELINE=1 but no $BUILD/libm2cpp_timeline.so (prepare where the toolkit has CUPTI)"
  fi
fi

# 4. Decode on dummy weights of the real shape: batch 1 at 1K context (the
# roofline figure), then batch 64 and 256; then an 8K-token prefill.
decode() {  # LAYERS SECONDS LOG EXTRA...
  local layers=$1 limit=$2 log=$3
  shift 3
  run "$limit" "$BUILD/m2cpp" bench decode -m configs/minimax-m2.7.json --load-format dummy --num-layers "$layers" \
    --device cuda --kv-dtype bf16 "$@" >> "$OUT/$log" 2>&1
}
if [[ -z "${SKIP_DECODE:-}" ]]; then
decode "$LAYERS" $(( $(left) - 15 )) decode.log --context 1024 --tokens 32 --json "$OUT/decode.json"
rc=$?
if (( rc != 0 )); then
  note "decode with $LAYERS layers failed or timed out (rc $rc, tail of decode.log below); trying 8 layers"
  tail -5 "$OUT/decode.log" | tee -a "$SUMMARY"
  (( $(left) > 45 )) && decode 8 $(( $(left) - 5 )) decode.log --context 1024 --tokens 32
  LAYERS=8
fi
# Ablation of the decode step's launch machinery: DECODE_VARIANTS="VAR=0 ..."
# reruns batch-1 decode with each variable set in turn.
if [[ -n "${DECODE_VARIANTS:-}" ]]; then
  for v in ${DECODE_VARIANTS}; do  # e.g. "M2CPP_CUDA_OPTIONS=pdl=off M2CPP_CUDA_OPTIONS=graphs=off"
    (( $(left) > 200 )) || break
    echo "== $v" >> "$OUT/decode_variants.log"
    IFS=, read -ra vars <<< "$v"
    for x in "${vars[@]}"; do export "$x"; done
    decode "$LAYERS" 150 decode_variants.log --context 1024 --tokens 32 --prefill-chunk 1024 ||
      note "decode with $v failed"
    for x in "${vars[@]}"; do unset "${x%%=*}"; done
  done
fi
for batch in ${DECODE_BATCHES-64 256}; do
  (( $(left) > 60 )) || break
  decode "$LAYERS" $(( $(left) - 40 )) decode_batch.log --context 1024 --batch $batch --tokens 8 \
    --json "$OUT/decode_b$batch.json" || note "decode at batch $batch failed (rc $?)"
done
# The same for the batch and prefill figures: BATCH_VARIANTS="M2CPP_CUDA_OPTIONS=moe_cutlass=off ..." reruns each
# batch of DECODE_BATCHES and, unless SKIP_PREFILL, the 8K prefill with each variable set in turn
# (batch_variants.log; each run loads the model again, ~60 s for 30 layers).
for v in ${BATCH_VARIANTS:-}; do
  IFS=, read -ra vars <<< "$v"
  for x in "${vars[@]}"; do export "$x"; done
  for batch in ${DECODE_BATCHES-64 256}; do
    (( $(left) > 150 )) || break
    echo "== $v, batch $batch" >> "$OUT/batch_variants.log"
    decode "$LAYERS" 120 batch_variants.log --context 1024 --batch $batch --tokens 8 || note "batch $batch with $v failed"
  done
  if [[ -z "${SKIP_PREFILL:-}" ]] && (( $(left) > 150 )); then
    echo "== $v, 8K prefill" >> "$OUT/batch_variants.log"
    decode "$LAYERS" 120 batch_variants.log --context 8192 --prefill-chunk 8192 --tokens 2 || note "prefill with $v failed"
  fi
  for x in "${vars[@]}"; do unset "${x%%=*}"; done
done
[[ -z "${SKIP_PREFILL:-}" ]] && (( $(left) > 60 )) && { decode "$LAYERS" $(( $(left) - 10 )) prefill.log --context 8192 --prefill-chunk 8192 --tokens 2 \
  --json "$OUT/prefill.json" || note "8K prefill failed (rc $?)"; }
fi

# 5. The table.
{
  echo
  echo "== CUDA tests: $TESTS"
  grep -E 'max \|' "$OUT/tests.log" | sed 's/^/   /'
  echo "== microbenchmarks (GPU time per call; % of the copy bandwidth measured now)"
  grep -E '^ceilings|^device' "$OUT/bench.log" | sed 's/^/   /'
  sed -n '/^kernel /,$p' "$OUT/bench.log" | sed 's/^/   /'
  echo "== m2cpp bench decode --device cuda (dummy M2.7 weights, $LAYERS layers, batch 1, 1K context)"
  grep -E '^(model|device|prefill|decode|bytes/token|bandwidth)' "$OUT/decode.log" | sed 's/^/   /'
  if [[ -s "$OUT/decode_variants.log" ]]; then
    echo "== the same with one launch feature off"
    grep -E '^(==|decode|bandwidth)' "$OUT/decode_variants.log" | sed 's/^/   /'
  fi
  [[ -s "$OUT/cutlass_moe.log" ]] && { echo "== grouped FP8 MoE GEMM: CUTLASS vs ours (cutlass_moe_bench)"; sed 's/^/   /' "$OUT/cutlass_moe.log" | head -60; }
  [[ -s "$OUT/profile.log" ]] && { echo "== per-op profile (profile=on)"; sed 's/^/   /' "$OUT/profile.log" | grep -vE 'loading|progress' | head -120; }
  [[ -s "$OUT/ncu_summary.txt" ]] && { echo "== kernels under ncu (decode steps, 2 layers)"; sed 's/^/   /' "$OUT/ncu_summary.txt"; }
  echo "== batch 64 and 256, 1K context"
  grep -E '^(decode|bytes/step|ceiling)' "$OUT/decode_batch.log" 2>/dev/null | sed 's/^/   /'
  echo "== prefill of 8K tokens in one step"
  grep -E '^prefill' "$OUT/prefill.log" 2>/dev/null | sed 's/^/   /'
  if [[ -s "$OUT/batch_variants.log" ]]; then
    echo "== batch and prefill with one variable set (BATCH_VARIANTS)"
    grep -E '^(==|decode|ceiling|prefill)' "$OUT/batch_variants.log" | sed 's/^/   /'
  fi
} | tee -a "$SUMMARY"
note "done"
# One archive of the logs (the device tool returns a limited number of files).
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude=logs.tgz . 2>/dev/null
