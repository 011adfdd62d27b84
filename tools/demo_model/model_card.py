#!/usr/bin/env python3
"""Writes models/m2-demo/MODEL_CARD.md from what the GPU run measured.

    python3 tools/demo_model/model_card.py RUN_DIR [--model models/m2-demo]

RUN_DIR holds the files the GPU run returned (summary.json, log.jsonl,
samples.txt); the card also reads models/m2-demo/config.json,
tools/demo_model/data/meta.json and, when present, the float64 reference's
greedy answer in tests/data/reference/m2-demo/prompt.json. Every number in the
card comes from those files.
"""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODEL = os.path.join(REPO, "models/m2-demo")

WORDNET_NOTICE = """\
WordNet Release 3.0. This software and database is being provided to you, the LICENSEE, by Princeton
University under the following license. By obtaining, using and/or copying this software and database,
you agree that you have read, understood, and will comply with these terms and conditions.: Permission
to use, copy, modify and distribute this software and database and its documentation for any purpose
and without fee or royalty is hereby granted, provided that you agree to comply with the following
copyright notice and statements, including the disclaimer, and that the same appear on ALL copies of
the software, database and documentation, including modifications that you make for internal use or for
distribution. WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved. THIS SOFTWARE AND
DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES, EXPRESS OR
IMPLIED. BY WAY OF EXAMPLE, BUT NOT LIMITATION, PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR
WARRANTIES OF MERCHANT- ABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR THAT THE USE OF THE LICENSED
SOFTWARE, DATABASE OR DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY PATENTS, COPYRIGHTS, TRADEMARKS OR
OTHER RIGHTS. The name of Princeton University or Princeton may not be used in advertising or publicity
pertaining to distribution of the software and/or database. Title to copyright in this software,
database and any associated documentation shall at all times remain with Princeton University and
LICENSEE agrees to preserve same."""


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="folder with the GPU run's summary.json, log.jsonl, samples.txt")
    ap.add_argument("--model", default=MODEL)
    args = ap.parse_args()
    run, model_dir = args.run, args.model
    summary = load(os.path.join(run, "summary.json"))
    cfg = load(os.path.join(model_dir, "config.json"))
    meta = load(os.path.join(HERE, "data/meta.json"))
    with open(os.path.join(run, "samples.txt")) as f:
        samples = f.read().strip()
    with open(os.path.join(run, "log.jsonl")) as f:
        log = [json.loads(line) for line in f if line.strip()]
    first_eval = next(r for r in log if "val_chat" in r)
    ref_path = os.path.join(REPO, "tests/data/reference/m2-demo/prompt.json")
    reference = load(ref_path) if os.path.exists(ref_path) else None
    size = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir)
               if os.path.isfile(os.path.join(model_dir, f)) and f != "MODEL_CARD.md")
    H, L, E, k, I = (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_local_experts"],
                     cfg["num_experts_per_tok"], cfg["intermediate_size"])
    q, kv, V = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"], cfg["vocab_size"]
    attn = H * q * 2 + H * kv * 2 + q + kv + 2 * H
    expert = 3 * H * I
    total = summary["parameters"]
    active = L * (attn + k * expert + E * H + E) + V * H + H  # the embedding row lookup not counted
    counts = meta["counts"]
    a = summary["args"]

    lines = [
        "# m2-demo: a tiny MiniMax-M2 model trained for the m2cpp demo",
        "",
        "A language model of the **MiniMax-M2 architecture and checkpoint format**, small enough to ship in the",
        "repository and answer on a laptop CPU in well under a second per sentence. It exists so that the first",
        "command a new user runs ends in a readable, chat-formatted answer, offline. It is not a useful assistant:",
        "see *What it can and cannot do*.",
        "",
        "## Files",
        "",
        "| file | what |",
        "| --- | --- |",
        "| `model.safetensors` | weights with the official names: BF16, per-expert `block_sparse_moe.experts.E.w1/w2/w3`, FP32 router `gate` and `e_score_correction_bias` |",
        "| `config.json` | the released field names (`rotary_dim`, `use_qk_norm`, `qk_norm_type`, `scoring_func`, `use_routing_bias`, `attn_type_list`, ...), plus `partial_rotary_factor` (transformers up to 5.17 ignores `rotary_dim`) and `bos_token_id`/`eos_token_id` |",
        "| `generation_config.json` | bos `]~b]` / eos `[e~[` as the release has them; sampling temperature 0.7, top-p 0.95, top-k 40 |",
        "| `tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja` | byte-level BPE with MiniMax-M2's pre-tokenizer and its 54 added tokens; the official chat template, byte for byte |",
        "| `loss.svg` | the loss curve of the training run |",
        "",
        f"Total size {size / 2**20:.1f} MiB.",
        "",
        "## Architecture",
        "",
        "| | this model | MiniMax-M2 |",
        "| --- | --- | --- |",
        f"| layers | {L}, every one MoE, full attention | 62 |",
        f"| hidden | {H} | 3072 |",
        f"| attention | {cfg['num_attention_heads']} q heads x {cfg['head_dim']}, {cfg['num_key_value_heads']} kv heads (q width {q} = {q // H} x hidden) | 48 x 128, 8 kv heads (6144 = 2 x hidden) |",
        f"| rotary | partial: {cfg['rotary_dim']} of {cfg['head_dim']} dims, NeoX pairing, theta {cfg['rope_theta']} | 64 of 128, theta 5e6 |",
        f"| QK norm | full width ({q} and {kv}), `per_layer` | full width (6144 and 1024) |",
        f"| experts | {E} SwiGLU experts of width {I}, top-{k}, sigmoid scores, correction bias for selection | 256 of width 1536, top-8 |",
        f"| vocabulary | {V} rows: 8128 BPE tokens, 54 added tokens at 8128-8181, 10 empty rows | 200,064: 200,000 + 54 + 10 |",
        f"| parameters | {total / 1e6:.2f} M total, {active / 1e6:.2f} M active per token | 230 B, ~10 B active |",
        "",
        "## Tokenizer",
        "",
        "Byte-level BPE trained with Hugging Face `tokenizers` on the training text: the o200k split regex + ByteLevel",
        "pre-tokenizer that MiniMax-M2 uses, no normalizer, no post-processor (the chat template writes `]~!b[`",
        "itself), the 54 MiniMax-M2 added tokens in the released order with the released special flags (`]~b]`,",
        "`[e~[` = EOS, `]~!b[` = BOS special; `<think>`, `</think>`, `<minimax:tool_call>`, `</minimax:tool_call>`",
        "not special). Built by `tools/demo_model/prepare.py`, which checks each of these fields against the",
        "M2-layout test tokenizer.",
        "",
        "## Training data",
        "",
        "| source | what | licence | tokens |",
        "| --- | --- | --- | --- |",
    ]
    src = meta["sources"]
    lines += [
        f"| Debian `r-cran-janeaustenr` {src['r-cran-janeaustenr']['debian_version']} | {src['r-cran-janeaustenr']['what']} | {src['r-cran-janeaustenr']['licence']} | text stream, with the Python docs: {counts['text']['tokens']:,} |",
        f"| Debian `python3.11-doc` {src['python3.11-doc']['debian_version']} | {src['python3.11-doc']['what']} | {src['python3.11-doc']['licence']} | (in the text stream) |",
        f"| Debian `wordnet-base` {src['wordnet-base']['debian_version']} | {src['wordnet-base']['what']} | {src['wordnet-base']['licence']} | facts in the chat stream |",
        f"| synthetic (`tools/demo_model/chat_data.py`) | {counts['chat']['documents']:,} conversations rendered with the official chat template: questions about words and things (answers written from WordNet facts), Python glossary terms (PSF), template stories, small talk, arithmetic, and tool calls in the M2 XML format with tool results; each final assistant turn has a short `<think>` block | generated here; facts from the sources above | {counts['chat']['tokens']:,} ({counts['chat']['loss_tokens']:,} assistant tokens with loss) |",
        "",
        "In the chat stream the loss covers only the assistant turns after the last user message (reasoning, answer,",
        "tool calls, `[e~[`); system, user and tool turns are context. Held out for validation: "
        f"{counts['val_text']['documents']} text documents and {counts['val_chat']['documents']:,} conversations.",
        "",
        "## Training",
        "",
        "```sh",
        "python3 tools/demo_model/prepare.py                 # CPU: sources, tokenizer, token ids (a few minutes)",
        f"bash tools/demo_model/train_on_gpu.sh {a['time_budget']:.0f}           # one H200: trains, exports, samples",
        "```",
        "",
        f"transformers' `MiniMaxM2ForCausalLM` (experts implementation `{summary['experts_implementation']}`), AdamW",
        f"(betas 0.9/0.95, weight decay {a['weight_decay']} on matrices), peak learning rate {a['lr']} with"
        f" {a['warmup_steps']} warm-up steps and a cosine decay to 10% over the wall-clock budget, gradient clipping at"
        f" 1.0, batches of {a['batch']} x {a['seq_len']} tokens ({a['chat_frac']:.0%} chat windows, the rest text"
        " windows), FP32 master weights with BF16 autocast, the router (gate GEMM, sigmoid, top-k) in FP32 as in the"
        " release.",
        "",
        "**Routing balance.** transformers keeps `e_score_correction_bias` as a buffer that no gradient reaches. The",
        "training loop updates it with the auxiliary-loss-free rule of DeepSeek-V3 / MiniMax: after every step, for",
        f"each layer, `bias_e += {a['bias_gamma']} * sign(mean_load - load_e)`, where `load_e` counts the tokens that"
        " selected expert e in that step. The shipped biases are therefore non-zero and are what keep the experts"
        " evenly loaded.",
        "",
        f"Run: {summary['step']:,} steps, {summary['tokens'] / 1e6:.0f} M tokens in {summary['seconds']:.0f} s. "
        f"Validation loss (nats/token) from {first_eval['val_text']:.2f} / {first_eval['val_chat']:.2f} at the first"
        f" evaluation to **{summary['val_text']:.2f}** on held-out text and **{summary['val_chat']:.2f}** on held-out"
        " chat answers.",
        "",
        "![loss curve](loss.svg)",
        "",
    ]
    if "reload_max_abs_logit_diff" in summary:
        lines += [f"The exported files, loaded back by transformers, reproduce the trained model's logits (weights"
                  f" rounded to BF16) to {summary['reload_max_abs_logit_diff']:.1e}.", ""]
    if reference is not None:
        lines += [
            "## Checked against the reference",
            "",
            "`tests/model/demo_model_test.cpp` runs m2cpp's CPU forward pass on this checkpoint against transformers in",
            "float64 (`tools/demo_model/make_reference.py`): every logit of a chat-formatted prompt within 5e-3, the same",
            "argmax everywhere, and the same greedy answer, which is:",
            "",
            "```",
            reference["prompt_text"] + reference["greedy_text"],
            "```",
            "",
        ]
    lines += [
        "## Samples",
        "",
        "Answers of the exported checkpoint (transformers) to prompts rendered with the chat template; the",
        "generation prompt ends in `<think>\\n`, so each answer starts inside the reasoning block.",
        "",
        "```",
        samples,
        "```",
        "",
        "## What it can and cannot do",
        "",
        "It can: follow the MiniMax-M2 conversation format (a short reasoning block, `</think>`, then the answer, then",
        "`[e~[`); answer \"tell me about X\" and \"what does X mean\" in a few plain sentences for common English words;",
        "tell a short template-like story; do small sums; call a weather, time, calculator or dictionary tool in the",
        "M2 XML format when one is offered, and phrase an answer from the tool's result.",
        "",
        "It cannot: know much. Its facts come from WordNet glosses, so for rarer words it confuses meanings or invents",
        "them; it has no knowledge of events, people or places beyond a dictionary line; long or unusual requests,",
        "several constraints at once, code, other languages and multi-step reasoning are beyond it; its reasoning",
        "block is a formula, not reasoning. Greedy decoding can loop; sampling at temperature 0.7 reads better.",
        "",
        "## Licence notices",
        "",
        "The weights are derived from the data above. Jane Austen's novels are in the public domain (the `janeaustenr`",
        "package that ships them: MIT, Copyright 2016-2017 Julia Silge). The Python documentation: Copyright (c)",
        "2001-2023 Python Software Foundation; All Rights Reserved; PSF License Version 2",
        "(https://docs.python.org/3/license.html). WordNet requires this notice on all copies:",
        "",
        "> " + WORDNET_NOTICE.replace("\n", " "),
        "",
    ]
    with open(os.path.join(model_dir, "MODEL_CARD.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {os.path.join(model_dir, 'MODEL_CARD.md')}")


if __name__ == "__main__":
    main()
