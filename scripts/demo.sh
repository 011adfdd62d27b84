#!/usr/bin/env bash
# `make demo`: the main job on the bundled model. Until the trained demo model
# ships (see docs/status.md), this runs the tiny reference checkpoint: its
# description, and a greedy continuation through the KV cache.
set -euo pipefail
M2CPP=${1:-build/m2cpp}
cd "$(dirname "$0")/.."
MODEL=tests/data/m2-tiny-bf16
echo "== m2cpp info -m $MODEL"
"$M2CPP" info -m "$MODEL"
echo
echo "== m2cpp generate -m $MODEL --ids 1,2,3,4,5 --max-tokens 16 --temperature 0 --json"
"$M2CPP" generate -m "$MODEL" --ids 1,2,3,4,5 --max-tokens 16 --temperature 0 --json
echo
echo "(random-weight test model: the ids are the reference-checked greedy continuation, not text;"
echo " a trained demo model that answers in English is tracked in docs/status.md)"
