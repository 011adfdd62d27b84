#!/usr/bin/env python3
"""Writes tests/data/m2-aligned-fp8: a 2-layer MiniMax-M2 FP8 checkpoint in the
official layout whose every matrix is a multiple of 128 (hidden 256, experts
256 wide, head_dim 128, 12 q heads over 2 kv heads as M2.7's group of 6, 4
experts, all 4 chosen: no routing discontinuity), so that the CUDA backend's FP8 tensor-core paths all take it:
dense cuBLASLt / own GEMM (17+ tokens), the grouped MoE on CUTLASS (more than
64 pairs), the tensor-core FP8 decode GEMV (up to 16 tokens). Weights are
normal with std 1/sqrt(in), quantised to e4m3 with 128 x 128 block scales
(amax / 448) the way FP8 checkpoints are made.

And tests/data/reference/m2-aligned-fp8/ from tools/w8a8_reference.py
(validated against transformers' float64 model: tests/tools):
  w8a8.npy      float64 [33, vocab]: the 33-token prompt in one pass, FP8
                activations per token per 128 channels (what the GPU runs at
                17+ tokens)
  w8a32.npy     float64 [33, vocab]: the same without activation quantisation
  short.npy     float64 [5, vocab]: its first 5 tokens, unquantised (the GPU
                keeps fp32 activations up to 16 tokens)
  prompt.json   the ids; w8a8_spread: how far the W8A8 reference itself moves
                under fp32-sized input noise (the bound an fp32 implementation
                can be held to, see below); w8a8_vs_w8a32

    python3 tools/make_w8a8_fixture.py --out tests/data
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import w8a8_reference as ref  # noqa: E402

CONFIG_OVERRIDES = {
    "hidden_size": 256, "intermediate_size": 256, "head_dim": 128, "rotary_dim": 64,
    "num_attention_heads": 12, "num_key_value_heads": 2, "num_local_experts": 4,
    "num_experts_per_tok": 4, "num_hidden_layers": 2, "attn_type_list": [1, 1],
}


def to_bf16_bytes(a):
    u = np.asarray(a, dtype=np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even
    return u.astype("<u2").tobytes()


def fp8_block_quantise(w):
    """(codes uint8 [r, c], scale_inv fp32 [r/128, c/128]) with w ~ E4M3[codes] * scale."""
    r, c = w.shape
    blocks = w.reshape(r // 128, 128, c // 128, 128)
    scale = (np.abs(blocks).max(axis=(1, 3)) / 448.0).astype(np.float32).astype(np.float64)
    v = ref.round_e4m3(blocks / scale[:, None, :, None]).reshape(r, c)
    mag = np.searchsorted(ref.E4M3[:127], np.abs(v))  # codes 0..126 hold 0 and the positive values, in order
    codes = (mag + np.where((v < 0) & (mag > 0), 128, 0)).astype(np.uint8)
    assert np.array_equal(ref.E4M3[codes], v)
    return codes, scale.astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the tests/data folder")
    ap.add_argument("--seed", type=int, default=1201)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "tests", "data", "m2-tiny-fp8", "config.json")) as f:
        cfg = json.load(f)
    cfg.update(CONFIG_OVERRIDES)
    H, I, V, E = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_local_experts"]
    qd, kvd = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]

    tensors = {}  # name -> (dtype, shape, bytes)

    def bf16(name, a):
        tensors[name] = ("BF16", list(a.shape), to_bf16_bytes(a))

    def f32(name, a):
        tensors[name] = ("F32", list(a.shape), np.asarray(a, "<f4").tobytes())

    def linear(name, rows, cols):
        codes, scale = fp8_block_quantise(rng.normal(0, 1 / np.sqrt(cols), (rows, cols)))
        tensors[name + ".weight"] = ("F8_E4M3", [rows, cols], codes.tobytes())
        f32(name + ".weight_scale_inv", scale)

    bf16("model.embed_tokens.weight", rng.normal(0, 1, (V, H)))
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        bf16(p + "input_layernorm.weight", 1 + 0.1 * rng.normal(size=H))
        bf16(p + "post_attention_layernorm.weight", 1 + 0.1 * rng.normal(size=H))
        linear(p + "self_attn.q_proj", qd, H)
        linear(p + "self_attn.k_proj", kvd, H)
        linear(p + "self_attn.v_proj", kvd, H)
        linear(p + "self_attn.o_proj", H, qd)
        bf16(p + "self_attn.q_norm.weight", 1 + 0.1 * rng.normal(size=qd))
        bf16(p + "self_attn.k_norm.weight", 1 + 0.1 * rng.normal(size=kvd))
        f32(p + "block_sparse_moe.gate.weight", rng.normal(0, 1 / np.sqrt(H), (E, H)))
        f32(p + "block_sparse_moe.e_score_correction_bias", 0.05 * rng.normal(size=E))
        for e in range(E):
            ep = f"{p}block_sparse_moe.experts.{e}."
            linear(ep + "w1", I, H)
            linear(ep + "w2", H, I)
            linear(ep + "w3", I, H)
    bf16("model.norm.weight", 1 + 0.1 * rng.normal(size=H))
    bf16("lm_head.weight", rng.normal(0, 1 / np.sqrt(H), (V, H)))

    model_dir = os.path.join(args.out, "m2-aligned-fp8")
    os.makedirs(model_dir, exist_ok=True)
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        dt, shape, b = tensors[name]
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(os.path.join(model_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

    cfg2, t = ref.load_checkpoint(model_dir)
    ids = [int(i) for i in rng.integers(0, V, 33)]
    rdir = os.path.join(args.out, "reference", "m2-aligned-fp8")
    os.makedirs(rdir, exist_ok=True)
    w8a8 = ref.forward(cfg2, t, ids, "dynamic")
    w8a32 = ref.forward(cfg2, t, ids, "none")
    np.save(os.path.join(rdir, "w8a8.npy"), w8a8)
    np.save(os.path.join(rdir, "w8a32.npy"), w8a32)
    np.save(os.path.join(rdir, "short.npy"), ref.forward(cfg2, t, ids[:5], "none"))
    # W8A8 is discontinuous: one e4m3 code that rounds the other way (an input
    # differing by fp32 rounding) moves that token's outputs by the size of
    # the quantisation noise, and every later token's through attention. So
    # an implementation computing in fp32 can only be expected within the
    # spread of the reference itself under fp32-sized input noise (relative
    # 6e-8 per element before each quantisation), measured here.
    spread = 0.0
    for noise_seed in range(4):
        noise = np.random.default_rng(noise_seed)
        noisy = ref.forward(cfg2, t, ids, "dynamic",
                            quantize=lambda x: ref.quantize_act(x * (1 + noise.normal(0, 6e-8, x.shape))))
        spread = max(spread, float(np.linalg.norm(noisy - w8a8) / np.linalg.norm(w8a8)))
    rel = float(np.linalg.norm(w8a8 - w8a32) / np.linalg.norm(w8a32))
    with open(os.path.join(rdir, "prompt.json"), "w") as f:
        json.dump({"prompt_ids": ids, "seed": args.seed, "generator": "tools/make_w8a8_fixture.py",
                   "w8a8_spread": spread, "w8a8_vs_w8a32": rel}, f)
    print(f"wrote {model_dir} ({offset / 2**20:.1f} MiB) and {rdir}; W8A8 vs W8A32: relative {rel:.4f}, "
          f"argmax agreement {np.mean(w8a8.argmax(1) == w8a32.argmax(1)):.3f}; W8A8 spread under fp32 noise "
          f"{spread:.4f}")


if __name__ == "__main__":
    main()
