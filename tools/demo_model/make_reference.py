#!/usr/bin/env python3
"""Float64 reference outputs of the bundled demo model, for
tests/model/demo_model_test.cpp (CPU, a minute):

    python3 tools/demo_model/make_reference.py

Loads models/m2-demo exactly as stored into transformers' MiniMaxM2ForCausalLM
in float64, with tools/make_reference_fixtures.py's float64 replacements of
transformers' float32 shortcuts (RMSNorm, router sigmoid, rotary tables,
softmax), after checking that transformers' own from_pretrained reads the
official layout to the same values. Then, for a chat-formatted prompt (the
official template, as m2cpp renders it):

  tests/data/reference/m2-demo/logits.npy    float64 [n_prompt, 8192]
  tests/data/reference/m2-demo/prompt.json   prompt text and ids, the greedy
                                             continuation (ids and text)
  tests/data/reference/m2-demo/checks.json   margins and versions

The first prompt whose margins keep the comparison well posed is used, as in
the foundation's fixtures: top-2 logit gaps > 1e-3 on the prompt and along the
greedy path, and a router selection gap (k-th vs (k+1)-th biased score) >
1e-5 everywhere. The fixtures ask 1e-4 of random weights; a trained router
has near-ties, and every chat prompt shares its first tokens (]~!b[]~b]system),
so a near-tie there cannot be avoided by choosing another prompt. 1e-5 is
still ~50x the fp32 error of m2cpp's router scores (~2e-7: logits agree to
~1e-6, sigmoid slope <= 1/4).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import load_file
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools"))

import chat_template_ref  # noqa: E402
import make_reference_fixtures as mrf  # noqa: E402

PROMPTS = ["Tell me about the sea.", "What is a cat?", "Tell me a short story about a fox.", "Who are you?"]
GREEDY_NEW = 40


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(REPO, "models/m2-demo"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests/data/reference/m2-demo"))
    args = ap.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    mrf.patch_float64()

    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    stored = load_file(os.path.join(args.model, "model.safetensors"))
    model = mrf.hf_model(cfg, mrf.dequantized(stored))
    mrf.check_from_pretrained(args.model, model)
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    source, variables = chat_template_ref.load_model_dir(args.model)

    for question in PROMPTS:
        text = chat_template_ref.render(source, [{"role": "user", "content": question}], **variables)
        ids = tok.encode(text, add_special_tokens=False).ids
        logits, router_gap, logit_gap = mrf.margins(model, ids)
        cont = mrf.greedy(model, ids, GREEDY_NEW)
        gmargin = mrf.greedy_margin(model, ids, cont)
        print(f"{question!r}: {len(ids)} tokens, router gap {router_gap:.2e}, top-2 gap {logit_gap:.2e}, "
              f"greedy gap {gmargin:.2e}")
        print("  greedy:", repr(tok.decode(cont, skip_special_tokens=False)))
        if router_gap > 1e-5 and logit_gap > 1e-3 and gmargin > 1e-3:
            break
    else:
        raise SystemExit("no prompt gave well-posed margins")

    os.makedirs(args.out, exist_ok=True)
    np.save(os.path.join(args.out, "logits.npy"), logits.numpy().astype(np.float64))
    with open(os.path.join(args.out, "prompt.json"), "w") as f:
        json.dump({"prompt_text": text, "prompt_ids": ids, "greedy_prompt_ids": ids, "greedy_ids": cont,
                   "greedy_text": tok.decode(cont, skip_special_tokens=False)}, f, indent=1, ensure_ascii=False)
    with open(os.path.join(args.out, "checks.json"), "w") as f:
        json.dump({
            "question": question,
            "min_router_selection_gap": router_gap,
            "min_top2_logit_gap": logit_gap,
            "min_greedy_top2_gap": gmargin,
            "logit_std": logits.std().item(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "reference": "transformers MiniMaxM2ForCausalLM, float64 (RMSNorm, router, rotary, softmax in float64)",
        }, f, indent=2)


if __name__ == "__main__":
    main()
