#!/usr/bin/env python3
"""The MiniMax-M2 forward pass in float64 (numpy), from a checkpoint in the
official layout, with the FP8 linears' activations optionally quantised as an
FP8 serving engine does (`activation_scheme: dynamic`, what vLLM and SGLang
run): per token per 128 input channels to e4m3, scale = amax / 448, round to
nearest even, saturating (docs/design.md, "FP8 numerics").

    python3 tools/w8a8_reference.py -m tests/data/m2-tiny-fp8 --ids 1,2,3 --quant dynamic --out logits.npy

--quant none is the float64 reference (validated equal to transformers' own
float64 logits on the fixtures: tests/tools/test_w8a8_reference.py);
--quant dynamic quantises the inputs of every FP8 linear (q, k, v, o and the
experts' w1, w3, w2: the SwiGLU output per (token, expert)); the router,
lm_head, norms and embedding stay unquantised, as in the checkpoints'
modules_to_not_convert. Everything else is float64. Independent of m2cpp's
code: the spec (shared/docs/m2-spec.md §2-3) and numpy only.
"""
import argparse
import json
import os
import struct

import numpy as np

E4M3_MAX = 448.0


def e4m3_values():
    """float64 value of each of the 256 e4m3fn codes (NaN for 0x7F, 0xFF)."""
    v = np.zeros(256)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 15, c & 7
        if e == 15 and m == 7:
            v[c] = np.nan
        elif e == 0:
            v[c] = m / 8 * 2.0 ** -6
        else:
            v[c] = (1 + m / 8) * 2.0 ** (e - 7)
        if s:
            v[c] = -v[c]
    return v


E4M3 = e4m3_values()
_POS = E4M3[:127]  # codes 0..126: 0 and the positive finite values, increasing


def round_e4m3(x):
    """x (float64 array) rounded to the nearest e4m3 value, ties to the even
    code, saturating at +-448 (NaN stays NaN)."""
    a = np.minimum(np.abs(x), E4M3_MAX)
    hi = np.clip(np.searchsorted(_POS, a, side="left"), 0, 126)  # first value >= a
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - _POS[lo], _POS[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    r = np.where(pick_hi, _POS[hi], _POS[lo])
    return np.where(np.isnan(x), np.nan, np.copysign(r, x))


def quantize_act(x, group=128):
    """Dynamic per-token-group quantisation: each row's columns in groups of
    `group` (the last may be partial), scale = amax / 448, value =
    e4m3(x / scale) * scale (an all-zero group stays zero)."""
    out = np.empty_like(x)
    for c0 in range(0, x.shape[-1], group):
        g = x[..., c0:c0 + group]
        scale = np.max(np.abs(g), axis=-1, keepdims=True) / E4M3_MAX
        safe = np.where(scale > 0, scale, 1.0)
        out[..., c0:c0 + group] = np.where(scale > 0, round_e4m3(g / safe) * safe, 0.0)
    return out


# ---- checkpoint -------------------------------------------------------------------------------

def read_safetensors(path, tensors):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = np.frombuffer(data[b:e], dtype=np.uint8)
        dt, shape = info["dtype"], info["shape"]
        if dt == "F32":
            a = raw.view("<f4").astype(np.float64)
        elif dt == "F16":
            a = raw.view("<f2").astype(np.float64)
        elif dt == "BF16":
            a = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif dt == "F8_E4M3":
            a = E4M3[raw]
        else:
            raise ValueError(f"{path}: tensor {name}: dtype {dt} not supported")
        tensors[name] = a.reshape(shape)


def load_checkpoint(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    tensors = {}
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    for name in files:
        read_safetensors(os.path.join(model_dir, name), tensors)
    return cfg, tensors


_DEQUANT = {}


def weight(tensors, name):
    """A linear's weight in float64, FP8 dequantised by its 128 x 128 block scales (cached)."""
    key = (id(tensors), name)
    if key in _DEQUANT:
        return _DEQUANT[key]
    w = tensors[name + ".weight"]
    s = tensors.get(name + ".weight_scale_inv")
    if s is not None:
        rows, cols = w.shape
        w = w * np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)[:rows, :cols]
    _DEQUANT[key] = w
    return w


# ---- forward ----------------------------------------------------------------------------------

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def forward(cfg, t, ids, quant="none", quantize=None, forced=None, routed=None):
    """Logits float64 [len(ids), vocab] of one causal pass over `ids` (positions 0..);
    `quantize` replaces quantize_act for quant="dynamic" (a perturbed rule).
    Routing replay (docs/rollout.md): `forced`, an int array [P, layers, top_k] with
    P <= len(ids), gives the experts of the first P positions instead of the biased
    top-k, weighted by their sigmoid scores renormalised over the forced set;
    `routed`, a list, receives the experts each position used, [len(ids), layers, top_k]."""
    q8 = (quantize or quantize_act) if quant == "dynamic" else (lambda a: a)
    fp8 = cfg.get("quantization_config") is not None

    def linear(x, name, quantised=True):
        return (q8(x) if fp8 and quantised else x) @ weight(t, name).T

    H, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or H // nh
    rd = cfg.get("rotary_dim") or hd
    eps, theta = cfg.get("rms_norm_eps", 1e-6), cfg.get("rope_theta", 10000.0)
    top_k, scaling = cfg["num_experts_per_tok"], cfg.get("routed_scaling_factor", 1.0)
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    inv_freq = 1.0 / theta ** (np.arange(0, rd, 2, dtype=np.float64) / rd)
    ang = pos[:, None] * inv_freq[None, :]  # [T, rd/2]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(x):  # [T, heads, hd], NeoX pairs (i, i + rd/2) of the first rd dims
        h = rd // 2
        a, b = x[..., :h].copy(), x[..., h:rd].copy()
        out = x.copy()
        out[..., :h] = a * cos[:, None, :] - b * sin[:, None, :]
        out[..., h:rd] = b * cos[:, None, :] + a * sin[:, None, :]
        return out

    x = t["model.embed_tokens.weight"][np.asarray(ids)]
    used = np.zeros((T, cfg["num_hidden_layers"], top_k), dtype=np.int64)
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms_norm(x, t[p + "input_layernorm.weight"], eps)
        q, k, v = (linear(h, p + "self_attn." + n) for n in ("q_proj", "k_proj", "v_proj"))
        if cfg.get("use_qk_norm", True):
            q = rms_norm(q, t[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, t[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q.reshape(T, nh, hd)), rope(k.reshape(T, nkv, hd))
        v = v.reshape(T, nkv, hd)
        g = nh // nkv
        att = np.empty((T, nh, hd))
        for head in range(nh):
            kv = head // g
            s = q[:, head, :] @ k[:, kv, :].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, head, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, kv, :]
        x = x + linear(att.reshape(T, nh * hd), p + "self_attn.o_proj")
        h2 = rms_norm(x, t[p + "post_attention_layernorm.weight"], eps)
        moe_p = p + "block_sparse_moe."
        scores = 1.0 / (1.0 + np.exp(-(h2 @ t[moe_p + "gate.weight"].T)))  # [T, E]
        bias = t.get(moe_p + "e_score_correction_bias")
        sel = scores + (bias if bias is not None and cfg.get("use_routing_bias", True) else 0.0)
        out = np.zeros_like(x)
        h2q = q8(h2) if fp8 else h2  # each token's input quantised once, as the engines do
        for tok in range(T):
            # top-k by the biased score, lower expert id first on ties
            chosen = sorted(range(sel.shape[1]), key=lambda e: (-sel[tok, e], e))[:top_k]
            if forced is not None and tok < len(forced):
                chosen = [int(e) for e in forced[tok][layer]]
            used[tok, layer] = chosen
            wsum = sum(scores[tok, e] for e in chosen)
            for e in chosen:
                ep = moe_p + f"experts.{e}."
                a = h2q[tok] @ weight(t, ep + "w1").T
                b = h2q[tok] @ weight(t, ep + "w3").T
                u = a / (1.0 + np.exp(-a)) * b
                y = (q8(u[None, :])[0] if fp8 else u) @ weight(t, ep + "w2").T
                out[tok] += scores[tok, e] / wsum * scaling * y
        x = x + out
    if routed is not None:
        routed.append(used)
    x = rms_norm(x, t["model.norm.weight"], eps)
    head = t["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else t["lm_head.weight"]
    return x @ head.T


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--quant", choices=["none", "dynamic"], default="none")
    ap.add_argument("--out", required=True, help=".npy of float64 [len(ids), vocab]")
    args = ap.parse_args()
    cfg, t = load_checkpoint(args.model)
    np.save(args.out, forward(cfg, t, [int(i) for i in args.ids.split(",")], args.quant))


if __name__ == "__main__":
    main()
