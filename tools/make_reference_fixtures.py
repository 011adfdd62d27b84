#!/usr/bin/env python3
"""Writes tiny MiniMax-M2 checkpoints in the official layout and the reference
outputs of transformers' MiniMaxM2ForCausalLM computed in float64.

Run where torch and transformers >= 5 are installed (CPU is enough):
    python3 tools/make_reference_fixtures.py --out tests/data

Each variant gets a model directory laid out exactly like the released
checkpoints (per-expert block_sparse_moe.experts.E.w1/w2/w3, FP32 router gate
and e_score_correction_bias, two shards + model.safetensors.index.json,
config.json with the released field names) and a reference directory with:
  prompt.json      the prompt ids and the greedy continuation ids
  logits.npy       float64 [n_prompt, vocab]: logits of every position
  checks.json      margins that make the comparison well posed (router
                   selection gap, top-2 logit gap) and provenance

The reference is transformers' own model code, loaded from the written
checkpoint directory (so the layout is checked), with four float32 shortcuts
of that code replaced by float64 (RMSNorm, router sigmoid, rotary tables,
attention softmax) so that the expected values are float64 throughout.
"""
import argparse
import json
import math
import os
import shutil

import numpy as np
import torch
import transformers
from safetensors.torch import save_file
from transformers import MiniMaxM2Config, MiniMaxM2ForCausalLM
from transformers.models.minimax_m2 import modeling_minimax_m2 as mm

# The adversarial tiny shape: q width (heads*head_dim = 256) != hidden (192),
# partial rotary (32 of 64), GQA 2:1, hidden and expert widths that are not
# multiples of the 128x128 FP8 block (partial blocks), top-3 of 8 experts.
BASE_CONFIG = {
    "architectures": ["MiniMaxM2ForCausalLM"],
    "attn_type_list": [1, 1, 1],
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 192,
    "intermediate_size": 96,
    "max_position_embeddings": 4096,
    "model_type": "minimax_m2",
    "mtp_transformer_layers": 1,
    "num_attention_heads": 4,
    "num_experts_per_tok": 3,
    "num_hidden_layers": 3,
    "num_key_value_heads": 2,
    "num_local_experts": 8,
    "num_mtp_modules": 3,
    "qk_norm_type": "per_layer",
    "rms_norm_eps": 1e-06,
    "rope_theta": 50000,
    "rotary_dim": 32,
    "scoring_func": "sigmoid",
    "shared_intermediate_size": 0,
    "tie_word_embeddings": False,
    "use_cache": True,
    "use_mtp": True,
    "use_qk_norm": True,
    "use_routing_bias": True,
    "vocab_size": 512,
}
FP8_QUANT = {
    "activation_scheme": "dynamic",
    "fmt": "float8_e4m3fn",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
    "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"],
}
PROMPT_LEN = 320
GREEDY_PROMPT_LEN = 40
GREEDY_NEW = 24


# ---- float64 versions of transformers' float32 shortcuts --------------------

def rmsnorm_forward(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def router_forward(self, hidden_states, e_score_correction_bias):
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    router_logits = torch.nn.functional.linear(hidden_states.to(self.weight.dtype), self.weight)
    routing_weights = torch.sigmoid(router_logits)
    scores_for_choice = routing_weights + e_score_correction_bias
    _, top_k_index = torch.topk(scores_for_choice, self.top_k, dim=-1, sorted=False)
    top_k_weights = routing_weights.gather(1, top_k_index)
    top_k_weights = top_k_weights / top_k_weights.sum(dim=-1, keepdim=True)
    return router_logits, top_k_weights, top_k_index


def rotary_forward(self, x, position_ids):
    dim = self.config.rotary_dim
    base = self.config.rope_parameters["rope_theta"]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = position_ids[..., None].to(torch.float64) * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def eager_attention_f64(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    key_states = mm.repeat_kv(key, module.num_key_value_groups)
    value_states = mm.repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = torch.softmax(attn_weights, dim=-1)
    attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
    return attn_output, attn_weights


def patch_float64():
    mm.MiniMaxM2RMSNorm.forward = rmsnorm_forward
    mm.MiniMaxM2TopKRouter.forward = router_forward
    mm.MiniMaxM2RotaryEmbedding.forward = rotary_forward
    mm.eager_attention_forward = eager_attention_f64


# ---- random weights in the official layout -----------------------------------

def random_weights(cfg, gen):
    """Official checkpoint names -> float64 tensors (the true values)."""
    H, I, E = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_local_experts"]
    qd = cfg["num_attention_heads"] * cfg["head_dim"]
    kvd = cfg["num_key_value_heads"] * cfg["head_dim"]
    V = cfg["vocab_size"]

    def normal(*shape, std):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std

    def norm_weight(n):  # non-unit norm weights
        return 1.0 + normal(n, std=0.3)

    w = {"model.embed_tokens.weight": normal(V, H, std=1.0)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = norm_weight(H)
        w[p + "self_attn.q_proj.weight"] = normal(qd, H, std=H ** -0.5)
        w[p + "self_attn.k_proj.weight"] = normal(kvd, H, std=H ** -0.5)
        w[p + "self_attn.v_proj.weight"] = normal(kvd, H, std=H ** -0.5)
        w[p + "self_attn.o_proj.weight"] = normal(H, qd, std=qd ** -0.5)
        w[p + "self_attn.q_norm.weight"] = norm_weight(qd)
        w[p + "self_attn.k_norm.weight"] = norm_weight(kvd)
        w[p + "post_attention_layernorm.weight"] = norm_weight(H)
        w[p + "block_sparse_moe.gate.weight"] = normal(E, H, std=H ** -0.5)
        # A correction bias large enough to change which experts win.
        w[p + "block_sparse_moe.e_score_correction_bias"] = normal(E, std=0.15)
        for e in range(E):
            ep = f"{p}block_sparse_moe.experts.{e}."
            w[ep + "w1.weight"] = normal(I, H, std=H ** -0.5)
            w[ep + "w2.weight"] = normal(H, I, std=I ** -0.5)
            w[ep + "w3.weight"] = normal(I, H, std=H ** -0.5)
    w["model.norm.weight"] = norm_weight(H)
    w["lm_head.weight"] = normal(V, H, std=H ** -0.5)
    return w


def is_fp8_linear(name):
    return name.endswith("_proj.weight") or ".experts." in name


def quantize_fp8_block(w, block=128):
    """[out, in] float64 -> (float8_e4m3fn weight, float32 scale_inv) with
    W ~= W8 * scale_inv[r // 128, c // 128] (partial edge blocks included)."""
    out_f, in_f = w.shape
    rb, cb = math.ceil(out_f / block), math.ceil(in_f / block)
    scale = torch.zeros(rb, cb, dtype=torch.float32)
    q = torch.zeros(out_f, in_f, dtype=torch.float8_e4m3fn)
    for i in range(rb):
        for j in range(cb):
            blk = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
            s = (blk.abs().max() / 448.0).to(torch.float32)
            scale[i, j] = s
            q[i * block:(i + 1) * block, j * block:(j + 1) * block] = (blk / s.double()).to(torch.float8_e4m3fn)
    return q, scale


def stored_tensors(true_w, fp8):
    """What the checkpoint stores: BF16 (or FP8 + scales), FP32 router."""
    out = {}
    for name, t in true_w.items():
        if "block_sparse_moe.gate." in name or "e_score_correction_bias" in name:
            out[name] = t.to(torch.float32).contiguous()
        elif fp8 and is_fp8_linear(name):
            q, s = quantize_fp8_block(t)
            out[name] = q.contiguous()
            out[name[: -len(".weight")] + ".weight_scale_inv"] = s.contiguous()
        else:
            out[name] = t.to(torch.bfloat16).contiguous()
    return out


def dequantized(stored):
    """The exact values the stored tensors represent, as float64."""
    vals = {}
    for name, t in stored.items():
        if name.endswith(".weight_scale_inv"):
            continue
        if t.dtype == torch.float8_e4m3fn:
            s = stored[name[: -len(".weight")] + ".weight_scale_inv"].double()
            s = s.repeat_interleave(128, 0)[: t.shape[0]].repeat_interleave(128, 1)[:, : t.shape[1]]
            vals[name] = t.double() * s
        else:
            vals[name] = t.double()
    return vals


def write_checkpoint(model_dir, cfg, stored):
    os.makedirs(model_dir, exist_ok=True)
    names = list(stored.keys())
    # Two shards, split in the middle of the layers, like the released files.
    half = len(names) // 2
    shards = [names[:half], names[half:]]
    weight_map = {}
    total = 0
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({n: stored[n] for n in shard}, os.path.join(model_dir, fname), metadata={"format": "pt"})
        for n in shard:
            weight_map[n] = fname
            total += stored[n].numel() * stored[n].element_size()
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


# ---- reference -----------------------------------------------------------------

def hf_model(cfg, values):
    """transformers' model in float64 holding exactly `values`."""
    # MTP is declared in every release but has no weights; transformers would
    # try MTP-assisted decoding from these fields, so they stay out of here.
    skip = ("quantization_config", "dtype", "torch_dtype", "use_mtp", "num_mtp_modules", "mtp_transformer_layers")
    hf_cfg = {k: v for k, v in cfg.items() if k not in skip}
    config = MiniMaxM2Config(**hf_cfg)
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"  # the per-expert loop; grouped_mm has no float64
    model = MiniMaxM2ForCausalLM(config).to(torch.float64).eval()
    sd = {}
    L, E = cfg["num_hidden_layers"], cfg["num_local_experts"]
    for name, t in values.items():
        if ".experts." in name or "block_sparse_moe.gate." in name or "e_score_correction_bias" in name:
            continue
        sd[name] = t
    for l in range(L):
        p = f"model.layers.{l}.block_sparse_moe."
        q = f"model.layers.{l}.mlp."
        sd[q + "gate.weight"] = values[p + "gate.weight"]
        sd[q + "e_score_correction_bias"] = values[p + "e_score_correction_bias"]
        sd[q + "experts.gate_up_proj"] = torch.stack(
            [torch.cat([values[f"{p}experts.{e}.w1.weight"], values[f"{p}experts.{e}.w3.weight"]], 0) for e in range(E)])
        sd[q + "experts.down_proj"] = torch.stack([values[f"{p}experts.{e}.w2.weight"] for e in range(E)])
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [m for m in missing if "rotary_emb" not in m]
    assert not missing and not unexpected, (missing, unexpected)
    return model


def check_from_pretrained(model_dir, model):
    """The written BF16 directory must load in transformers to the same values
    (proves the official layout, incl. the per-expert -> fused mapping)."""
    loaded = MiniMaxM2ForCausalLM.from_pretrained(model_dir, dtype=torch.float64, experts_implementation="eager")
    ref = dict(model.named_parameters())
    for name, p in loaded.named_parameters():
        assert torch.equal(p, ref[name]), f"from_pretrained differs at {name}"
    for name, b in loaded.named_buffers():
        if "e_score_correction_bias" in name:
            assert torch.equal(b, dict(model.named_buffers())[name]), name


@torch.no_grad()
def margins(model, ids):
    """Smallest router selection gap (k-th vs (k+1)-th biased score) over all
    tokens and layers, and smallest top-2 logit gap over positions."""
    gaps = []

    def hook(mod, inp, out):
        h = inp[0].reshape(-1, mod.hidden_dim)
        s = torch.sigmoid(h @ mod.weight.T)
        bias = mod._bias_ref
        srt = torch.sort(s + bias, dim=-1, descending=True).values
        gaps.append((srt[:, mod.top_k - 1] - srt[:, mod.top_k]).min().item())

    handles = []
    for layer in model.model.layers:
        layer.mlp.gate._bias_ref = layer.mlp.e_score_correction_bias
        handles.append(layer.mlp.gate.register_forward_hook(hook))
    logits = model(torch.tensor([ids])).logits[0]
    for h in handles:
        h.remove()
    top2 = torch.topk(logits, 2, dim=-1).values
    return logits, min(gaps), (top2[:, 0] - top2[:, 1]).min().item()


@torch.no_grad()
def greedy(model, prompt, n):
    """Greedy decoding one token per step through transformers' KV cache."""
    out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False, eos_token_id=None,
                         pad_token_id=0, min_new_tokens=n)
    return out[0, len(prompt):].tolist()


@torch.no_grad()
def greedy_margin(model, prompt, continuation):
    logits = model(torch.tensor([prompt + continuation])).logits[0]
    top2 = torch.topk(logits[len(prompt) - 1:-1], 2, dim=-1).values
    return (top2[:, 0] - top2[:, 1]).min().item()


def make_variant(out_dir, name, fp8, seed):
    cfg = dict(BASE_CONFIG)
    cfg["torch_dtype"] = "bfloat16"
    if fp8:
        cfg["quantization_config"] = FP8_QUANT
    for attempt in range(50):
        gen = torch.Generator().manual_seed(seed + attempt)
        true_w = random_weights(cfg, gen)
        stored = stored_tensors(true_w, fp8)
        model = hf_model(cfg, dequantized(stored))
        ids = torch.randint(0, cfg["vocab_size"], (PROMPT_LEN,), generator=gen).tolist()
        logits, router_gap, logit_gap = margins(model, ids)
        prompt = ids[:GREEDY_PROMPT_LEN]
        cont = greedy(model, prompt, GREEDY_NEW)
        gmargin = greedy_margin(model, prompt, cont)
        std = logits.std().item()
        print(f"{name} seed {seed + attempt}: router gap {router_gap:.2e}, top-2 gap {logit_gap:.2e}, "
              f"greedy gap {gmargin:.2e}, logit std {std:.3f}")
        # Well posed: fp32 noise (~1e-5) cannot flip an expert choice or an argmax.
        if router_gap > 1e-4 and logit_gap > 1e-3 and gmargin > 1e-3:
            break
    else:
        raise SystemExit(f"{name}: no seed gave well-posed margins")

    model_dir = os.path.join(out_dir, name)
    if os.path.exists(model_dir):
        shutil.rmtree(model_dir)
    write_checkpoint(model_dir, cfg, stored)
    if not fp8:
        check_from_pretrained(model_dir, model)
    ref_dir = os.path.join(out_dir, "reference", name)
    os.makedirs(ref_dir, exist_ok=True)
    np.save(os.path.join(ref_dir, "logits.npy"), logits.numpy().astype(np.float64))
    with open(os.path.join(ref_dir, "prompt.json"), "w") as f:
        json.dump({"prompt_ids": ids, "greedy_prompt_ids": prompt, "greedy_ids": cont}, f)
    with open(os.path.join(ref_dir, "checks.json"), "w") as f:
        json.dump({
            "seed": seed + attempt,
            "min_router_selection_gap": router_gap,
            "min_top2_logit_gap": logit_gap,
            "min_greedy_top2_gap": gmargin,
            "logit_std": std,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "reference": "transformers MiniMaxM2ForCausalLM, float64 (RMSNorm, router, rotary, softmax in float64)",
        }, f, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/data")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    patch_float64()
    make_variant(args.out, "m2-tiny-bf16", fp8=False, seed=args.seed)
    make_variant(args.out, "m2-tiny-fp8", fp8=True, seed=args.seed + 1000)


if __name__ == "__main__":
    main()
