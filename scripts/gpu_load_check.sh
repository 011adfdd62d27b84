#!/usr/bin/env bash
# Shows on the GPU machine that loading a checkpoint streams it to the GPU
# without holding it in host memory:
#   1. writes an FP8 checkpoint in the official MiniMax-M2 layout at the real
#      M2.7 shape with LAYERS layers (tools/make_m2_checkpoint.py: ~1.84 GB
#      shards, each dropped from the page cache once written; 12 layers are
#      46.5 GB = 43.3 GiB);
#   2. drops the page cache (when permitted: root), so the load reads the disk;
#   3. runs `m2cpp bench decode -m CHECKPOINT --device cuda` (load, upload,
#      a short prefill and decode) while sampling its VmRSS/VmHWM every 0.2 s
#      (and under /usr/bin/time -v when the image has it);
#   4. prints the upload rate and the peak RSS beside the checkpoint's size,
#      PASS when the peak stays under 10 % of it; removes the checkpoint
#      (KEEP=1 keeps it).
# Logs go to $OUT (the device tool's output folder; /tmp/gpu_load_check_out otherwise).
#
#   scripts/gpu_check.sh --prepare     on the build machine: builds build-gpu/ (carry it)
#   scripts/gpu_load_check.sh [LAYERS] on the GPU machine (default 12; the disk
#                                      needs LAYERS x 3.67 + 2.5 GB free)
# CKPT_DIR: where the checkpoint is written (default /tmp/m2-load-check).
# A dry run of this script without a GPU: DEVICE=cpu BUILD=build GEN_ARGS="--set
# hidden_size=256 --set num_local_experts=8 ..." (the CPU backend computes from
# the mapping and releases nothing, so only the GPU run's RSS is the point).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build-gpu}
LAYERS=${1:-${LAYERS:-12}}
CKPT=${CKPT_DIR:-/tmp/m2-load-check}
DEVICE=${DEVICE:-cuda}
BUDGET=${BUDGET:-570}  # seconds for the whole run (the device tool allows 600)
OUT=${OUT:-/tmp/gpu_load_check_out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "[gpu_load_check +${SECONDS}s] $*" | tee -a "$SUMMARY"; }
gib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1073741824 }'; }
cached_bytes() { awk '/^Cached:/ { print $2 * 1024 }' /proc/meminfo; }
first_child() {
  if command -v pgrep > /dev/null; then pgrep -P "$1" | head -1; else awk '{ print $1 }' "/proc/$1/task/$1/children" 2> /dev/null; fi
}

source "$ROOT/scripts/gpu_libs.sh"
LDP="LD_LIBRARY_PATH=$(gpu_library_path "$ROOT/$BUILD")"
note "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
note "host: $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM"

# 1. The binary: carried, or built here.
if ! env "$LDP" "$BUILD/m2cpp" --help > /dev/null 2> "$OUT/build.log"; then
  note "carried $BUILD/m2cpp does not start (see build.log); building here"
  BUILD=build-gpu-here
  if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DM2CPP_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90a-real -DM2CPP_BUILD_TESTS=OFF -DM2CPP_BUILD_BENCH=OFF &&
      cmake --build "$BUILD" -j "$(nproc)" --target m2cpp; } >> "$OUT/build.log" 2>&1; then
    note "the build here failed (tail of build.log below)"
    tail -20 "$OUT/build.log" | tee -a "$SUMMARY"
    exit 1
  fi
  LDP="LD_LIBRARY_PATH=$(gpu_library_path "$ROOT/$BUILD")"
fi

# 2. The checkpoint.
rm -rf "$CKPT"
mkdir -p "$CKPT"
need=$(awk -v l="$LAYERS" 'BEGIN { printf "%d", (l * 3.672 + 2.46 + 1) * 1e9 }')
avail=$(df -B1 --output=avail "$CKPT" | tail -1)
note "checkpoint: $LAYERS layers in $CKPT, needs $(gib "$need") GiB, $(gib "$avail") GiB free there"
if (( avail < need )); then
  note "not enough disk: fewer layers (scripts/gpu_load_check.sh N) or CKPT_DIR elsewhere"
  exit 1
fi
if ! python3 tools/make_m2_checkpoint.py --layers "$LAYERS" --out "$CKPT" ${GEN_ARGS:-} > "$OUT/write.log" 2>&1; then
  note "writing the checkpoint failed (tail of write.log below)"
  tail -20 "$OUT/write.log" | tee -a "$SUMMARY"
  rm -rf "$CKPT"
  exit 1
fi
note "$(tail -1 "$OUT/write.log")"
ckpt_bytes=$(stat -c %s "$CKPT"/*.safetensors | awk '{ s += $1 } END { print s }')
shards=$(ls "$CKPT"/*.safetensors | wc -l)

# 3. A cold page cache: the writer dropped each shard (posix_fadvise); a
# global drop also needs root.
sync
if echo 3 2> /dev/null > /proc/sys/vm/drop_caches; then
  note "page cache dropped (echo 3 > /proc/sys/vm/drop_caches)"
else
  note "page cache not dropped globally (not permitted); each shard was dropped by the writer (posix_fadvise DONTNEED)"
fi
cached_before=$(cached_bytes)

# 4. The load, sampled.
TIME=()
[[ -x /usr/bin/time ]] && TIME=(/usr/bin/time -v -o "$OUT/time.txt")
echo "seconds vm_rss_kib vm_hwm_kib page_cache_kib" > "$OUT/rss.tsv"
start=$(date +%s.%N)
timeout $(( BUDGET - SECONDS - 30 )) env "$LDP" "${TIME[@]}" "$BUILD/m2cpp" bench decode -m "$CKPT" --device "$DEVICE" \
  --kv-dtype bf16 --context 256 --tokens 8 > "$OUT/load.log" 2>&1 &
runner=$!
peak_kib=0
while kill -0 "$runner" 2> /dev/null; do
  pid=$runner  # timeout -> (time ->) m2cpp: follow the children down
  while child=$(first_child "$pid") && [[ -n "$child" ]]; do pid=$child; done
  if [[ -r /proc/$pid/status && "$(cat /proc/$pid/comm 2> /dev/null)" == m2cpp ]]; then
    read -r rss hwm < <(awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { print r + 0, h + 0 }' /proc/$pid/status)
    (( hwm > peak_kib )) && peak_kib=$hwm
    echo "$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }') $rss $hwm $(( $(cached_bytes) / 1024 ))" \
      >> "$OUT/rss.tsv"
  fi
  sleep 0.2
done
wait "$runner"
rc=$?
(( rc == 0 )) || note "m2cpp bench decode failed (rc $rc; tail of load.log below)"
(( rc == 0 )) || tail -20 "$OUT/load.log" | tee -a "$SUMMARY"
time_kib=$(awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$OUT/time.txt" 2> /dev/null)
(( ${time_kib:-0} > peak_kib )) && peak_kib=$time_kib
peak=$(( peak_kib * 1024 ))

# 5. The table.
{
  echo
  echo "== streaming load: $LAYERS layers of the M2.7 shape${GEN_ARGS:+ (changed by GEN_ARGS)}, FP8, $shards shards," \
    "$(gib "$ckpt_bytes") GiB on disk"
  echo "   page cache before the load: $(gib "$cached_before") GiB; after: $(gib "$(cached_bytes)") GiB"
  grep -E 'weights -> GPU' "$OUT/load.log" | sed 's/^/   /'
  echo "   peak RSS of m2cpp: $(gib "$peak") GiB (VmHWM sampled every 0.2 s${time_kib:+; /usr/bin/time: $(gib $(( time_kib * 1024 ))) GiB})" \
    "= $(awk -v p="$peak" -v c="$ckpt_bytes" 'BEGIN { printf "%.1f", 100 * p / c }') % of the checkpoint"
  echo "   RSS over time: $OUT/rss.tsv ($(( $(wc -l < "$OUT/rss.tsv") - 1 )) samples)"
  grep -E '^(model|prefill|decode)' "$OUT/load.log" | sed 's/^/   /'
  if (( rc == 0 && peak > 0 && peak * 10 < ckpt_bytes )); then
    echo "   PASS: the load held under 10 % of the checkpoint in host memory"
  else
    echo "   FAIL: rc $rc, peak RSS $(gib "$peak") GiB of a $(gib "$ckpt_bytes") GiB checkpoint"
  fi
} | tee -a "$SUMMARY"
[[ "${KEEP:-}" == 1 ]] || rm -rf "$CKPT"
note "done"
