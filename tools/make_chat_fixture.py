#!/usr/bin/env python3
"""Writes tests/data/m2-tiny-chat/: a random-weight MiniMax-M2 checkpoint in
the official layout whose 4,096-token vocabulary matches the committed m2-mini
tokenizer (tests/data/tokenizer/m2-mini: MiniMax-M2's added tokens at
3840..3893, EOS `[e~[` = 3860), so that `m2cpp serve` has a tokenizer and a
chat template to run against. The weights are random: the model writes
nonsense, and never a tool call (the server tests use `--replay` for that).

Only numpy is needed: the safetensors file is written directly (8-byte header
length, JSON header, raw little-endian data). BF16 values are the float32
values rounded to nearest-even. The output is deterministic.

    python3 tools/make_chat_fixture.py [--out tests/data/m2-tiny-chat]
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOKENIZER_DIR = os.path.join(ROOT, "tests", "data", "tokenizer", "m2-mini")

CONFIG = {
    "architectures": ["MiniMaxM2ForCausalLM"],
    "attn_type_list": [1, 1],
    "head_dim": 32,
    "hidden_act": "silu",
    "hidden_size": 64,
    "intermediate_size": 64,
    "max_position_embeddings": 2048,
    "model_type": "minimax_m2",
    "num_attention_heads": 2,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 2,
    "num_key_value_heads": 1,
    "num_local_experts": 4,
    "qk_norm_type": "per_layer",
    "rms_norm_eps": 1e-06,
    "rope_theta": 5000000,
    "rotary_dim": 16,
    "scoring_func": "sigmoid",
    "shared_intermediate_size": 0,
    "tie_word_embeddings": False,
    "use_cache": True,
    "use_mtp": False,
    "use_qk_norm": True,
    "use_routing_bias": True,
    "vocab_size": 4096,
    "bos_token_id": 3859,
    "eos_token_id": 3860,
    "torch_dtype": "bfloat16",
}
# The model card's sampling defaults, as the released generation_config.json.
GENERATION_CONFIG = {"bos_token_id": 3859, "eos_token_id": 3860, "do_sample": True,
                     "temperature": 1.0, "top_p": 0.95, "top_k": 40}


def random_weights(cfg, rng):
    H, I, E = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_local_experts"]
    qd = cfg["num_attention_heads"] * cfg["head_dim"]
    kvd = cfg["num_key_value_heads"] * cfg["head_dim"]
    V = cfg["vocab_size"]

    def normal(*shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm_weight(n):
        return (1.0 + rng.standard_normal(n) * 0.3).astype(np.float32)

    w = {"model.embed_tokens.weight": ("BF16", normal(V, H, std=1.0))}
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = ("BF16", norm_weight(H))
        w[p + "self_attn.q_proj.weight"] = ("BF16", normal(qd, H, std=H ** -0.5))
        w[p + "self_attn.k_proj.weight"] = ("BF16", normal(kvd, H, std=H ** -0.5))
        w[p + "self_attn.v_proj.weight"] = ("BF16", normal(kvd, H, std=H ** -0.5))
        w[p + "self_attn.o_proj.weight"] = ("BF16", normal(H, qd, std=qd ** -0.5))
        w[p + "self_attn.q_norm.weight"] = ("BF16", norm_weight(qd))
        w[p + "self_attn.k_norm.weight"] = ("BF16", norm_weight(kvd))
        w[p + "post_attention_layernorm.weight"] = ("BF16", norm_weight(H))
        w[p + "block_sparse_moe.gate.weight"] = ("F32", normal(E, H, std=H ** -0.5))
        w[p + "block_sparse_moe.e_score_correction_bias"] = ("F32", normal(E, std=0.15))
        for e in range(E):
            ep = f"{p}block_sparse_moe.experts.{e}."
            w[ep + "w1.weight"] = ("BF16", normal(I, H, std=H ** -0.5))
            w[ep + "w2.weight"] = ("BF16", normal(H, I, std=I ** -0.5))
            w[ep + "w3.weight"] = ("BF16", normal(I, H, std=H ** -0.5))
    w["model.norm.weight"] = ("BF16", norm_weight(H))
    # A larger scale than 1/sqrt(H) gives peakier next-token distributions, so
    # greedy and seeded outputs are not dominated by near-ties.
    w["lm_head.weight"] = ("BF16", normal(V, H, std=4 * H ** -0.5))
    return w


def to_bytes(dtype, a):
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
    return rounded.astype("<u2").tobytes()


def write_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        dtype, a = tensors[name]
        data = to_bytes(dtype, a)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "m2-tiny-chat"))
    ap.add_argument("--seed", type=int, default=20261130)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    write_safetensors(os.path.join(args.out, "model.safetensors"), random_weights(CONFIG, rng))
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump(GENERATION_CONFIG, f, indent=2)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(TOKENIZER_DIR, name), os.path.join(args.out, name))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
