#!/usr/bin/env bash
# The demo model's GPU run, in one call on the device machine (one H200,
# python3 with torch, transformers, tokenizers, safetensors, jinja2; no network).
# Needs the token ids that tools/demo_model/prepare.py wrote (tools/demo_model/data/)
# and the tokenizer files in models/m2-demo/, both travelling with the working tree.
#
#   bash tools/demo_model/train_on_gpu.sh [TRAIN_SECONDS [TRAIN.PY OPTIONS...]]   (default 400 s)
#
# Writes under $OUT (at most 8 files of at most 16 MiB come back):
#   m2-demo.tar.part00, .part01   the exported checkpoint folder (official
#                    layout + tokenizer), one tar split in two
#   train.log        everything printed, samples included
#   log.jsonl        the training log; loss.svg its curve
#   samples.txt      answers of the exported checkpoint to a few prompts
#   summary.json     parameters, tokens, final losses, reload check
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?OUT must name the output folder}
SECONDS_BUDGET=${1:-400}
RUN=/tmp/m2-demo-run
rm -rf "$RUN"
export PYTHONUNBUFFERED=1

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, transformers, tokenizers; print("torch", torch.__version__, "transformers",
transformers.__version__, "tokenizers", tokenizers.__version__, "cuda", torch.cuda.is_available())'
  # The training stops itself after SECONDS_BUDGET; the outer timeout only guards
  # the packing below against a hang.
  timeout $((SECONDS_BUDGET + 150)) python3 tools/demo_model/train.py --out "$RUN" --time-budget "$SECONDS_BUDGET" "${@:2}"
  echo "train.py exit status $?"
} 2>&1 | tee "$OUT/train.log"

# One returned file may hold 16 MiB: the ~27 MB folder comes back as a tar in
# two pieces, m2-demo.tar.part00 and part01 (`cat m2-demo.tar.part* | tar -x`).
if [[ -f "$RUN/m2-demo/model.safetensors" ]]; then
  tar -C "$RUN" -cf - m2-demo | split -b 15m -d - "$OUT/m2-demo.tar.part"
fi
for f in log.jsonl loss.svg samples.txt summary.json; do
  [[ -f "$RUN/$f" ]] && cp "$RUN/$f" "$OUT/"
done
echo "== summary"
cat "$OUT/summary.json" 2>/dev/null || echo "(no summary: see train.log)"
ls -la "$OUT"
