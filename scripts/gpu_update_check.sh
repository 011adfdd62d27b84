#!/usr/bin/env bash
# Measures a weight update from disk on the GPU machine (issue 31, point 4;
# docs/rollout.md): the M2.7 shape with LAYERS layers (as many as the disk
# holds: 12 layers are 46.5 GB), beside the disk's and PCIe's ceilings.
#   1. writes an FP8 checkpoint in the official layout (tools/make_m2_checkpoint.py);
#   2. ceilings: the disk's sequential read of one shard with a cold page
#      cache (dd), and host-to-device copies from pageable and from pinned
#      memory (torch, where the image has it);
#   3. `m2cpp serve -m CHECKPOINT --device cuda --enable-weight-updates`; a
#      greedy completion of a token-id prompt with logprobs;
#   4. /pause_generation, the page cache dropped, /update_weights_from_disk of
#      the same checkpoint (cold), again (warm: the files in the page cache, as
#      right after a trainer wrote them), /continue_generation, each timed;
#   5. the completion again: the same bytes were written, so the same tokens
#      and logprobs (PASS / FAIL), and the server's own rate lines.
# Logs in $OUT. Needs root for the page-cache drops (else says so).
#
#   scripts/gpu_check.sh --prepare         on the build machine (carry build-gpu/)
#   scripts/gpu_update_check.sh [LAYERS]   on the GPU machine (default 12)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build-gpu}
LAYERS=${1:-${LAYERS:-12}}
CKPT=${CKPT_DIR:-/tmp/m2-update-check}
PORT=${PORT:-8124}
TOKENIZER_DIR=${TOKENIZER_DIR:-.gpu_carry/m2-layout}
OUT=${OUT:-/tmp/gpu_update_check_out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "[gpu_update_check +${SECONDS}s] $*" | tee -a "$SUMMARY"; }
drop_cache() { sync; echo 3 2> /dev/null > /proc/sys/vm/drop_caches; }
source "$ROOT/scripts/gpu_libs.sh"
LDP=$(gpu_library_path "$ROOT/$BUILD")
note "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
note "host: $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, $(df -h --output=avail /tmp | tail -1) free in /tmp"

rm -rf "$CKPT"
mkdir -p "$CKPT"
if ! python3 tools/make_m2_checkpoint.py --layers "$LAYERS" --out "$CKPT" > "$OUT/write.log" 2>&1; then
  note "writing the checkpoint failed"; tail -5 "$OUT/write.log" | tee -a "$SUMMARY"; exit 1
fi
note "$(tail -1 "$OUT/write.log")"
cp "$TOKENIZER_DIR/tokenizer.json" "$TOKENIZER_DIR/tokenizer_config.json" "$CKPT/"

# 2. Ceilings.
shard=$(ls "$CKPT"/*.safetensors | head -2 | tail -1)
if drop_cache; then
  note "disk: $(dd if="$shard" of=/dev/null bs=64M 2>&1 | tail -1) (one shard, cold page cache)"
else
  note "page cache cannot be dropped (not root): no cold figures"
fi
python3 - <<'EOF' 2>&1 | tee -a "$SUMMARY"
try:
    import time, torch
    n = 2 << 30
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    for pinned in (False, True):
        host = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
        host.fill_(1)
        dev.copy_(host); torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(3): dev.copy_(host)
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t) / 3
        print(f"[ceiling] host-to-device from {'pinned' if pinned else 'pageable'} memory: {n / dt / 1e9:.1f} GB/s (2 GiB copies, torch)")
except Exception as e:
    print(f"[ceiling] host-to-device not measured: {e}")
EOF

# 3. The server.
env LD_LIBRARY_PATH="$LDP" "$BUILD/m2cpp" serve -m "$CKPT" --device cuda --port "$PORT" --enable-weight-updates \
  --max-model-len 4096 --max-num-seqs 16 --disable-access-log > "$OUT/serve.log" 2>&1 &
SERVER=$!
start=$SECONDS
for _ in $(seq 1 600); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=2)" 2> /dev/null && break
  kill -0 $SERVER 2> /dev/null || break
  sleep 0.5
done
note "server up in $((SECONDS - start)) s: $(grep -m1 -E 'weights -> GPU 0: [0-9.]+ GiB' "$OUT/serve.log" | sed 's/.*info] //')"

# 4-5. The updates, timed from the client.
python3 - "$PORT" "$CKPT" "$OUT" <<'EOF' 2>&1 | tee -a "$SUMMARY"
import json, os, subprocess, sys, time, urllib.request
port, ckpt, out = sys.argv[1], sys.argv[2], sys.argv[3]
base = f"http://127.0.0.1:{port}"
def post(path, body, timeout=900):
    t = time.perf_counter()
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        j = json.loads(r.read())
    return j, time.perf_counter() - t
def complete():
    j, _ = post("/v1/completions", {"prompt": list(range(100, 164)), "max_tokens": 16, "temperature": 0, "logprobs": 1})
    c = j["choices"][0]
    return c["logprobs"]["tokens"], c["logprobs"]["token_logprobs"]
def drop():
    try:
        subprocess.run(["sync"]); open("/proc/sys/vm/drop_caches", "w").write("3\n"); return "cold page cache"
    except OSError:
        return "page cache not dropped"
gb = sum(os.path.getsize(os.path.join(ckpt, f)) for f in os.listdir(ckpt) if f.endswith(".safetensors")) / 1e9
before = complete()
j, t = post("/pause_generation", {"mode": "abort"})
print(f"[update] /pause_generation {t * 1e3:.1f} ms")
for label in ("cold", "warm"):
    state = drop() if label == "cold" else "page cache warm"
    j, t = post("/update_weights_from_disk", {"model_path": ckpt, "weight_version": label})
    print(f"[update] /update_weights_from_disk ({state}): {t:.2f} s for {gb:.2f} GB = {gb / t:.2f} GB/s end to end; "
          f"{j.get('num_tensors')} tensors, success {j.get('success')}")
j, t = post("/continue_generation", {})
print(f"[update] /continue_generation {t * 1e3:.1f} ms")
after = complete()
print(f"[update] {'PASS' if after == before else 'FAIL'}: the completion after the updates (same bytes) "
      f"{'equals' if after == before else 'differs from'} the one before (16 tokens and logprobs)")
EOF
grep -E "weight update -> GPU|tensors replaced" "$OUT/serve.log" | sed 's/^/[server] /' | tee -a "$SUMMARY"
kill -INT $SERVER 2> /dev/null
wait $SERVER 2> /dev/null
[[ "${KEEP:-}" == 1 ]] || rm -rf "$CKPT"
note "done"
