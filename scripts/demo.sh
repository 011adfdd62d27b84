#!/usr/bin/env bash
# `make demo`: chat with the bundled demo model (models/m2-demo, a 13 M-parameter
# model of the MiniMax-M2 architecture trained for this project; see its
# MODEL_CARD.md). In a terminal it starts the interactive chat; otherwise it
# answers one question and exits.
set -euo pipefail
M2CPP=${1:-build/m2cpp}
cd "$(dirname "$0")/.."
if [[ -t 0 && -t 1 ]]; then
  exec "$M2CPP" run -m models/m2-demo
fi
echo "> Tell me about the sea."
"$M2CPP" run -m models/m2-demo -p "Tell me about the sea."
