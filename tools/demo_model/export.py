"""Writes a trained transformers MiniMaxM2ForCausalLM in the official MiniMax-M2
checkpoint layout (spec §3), the way the released models are published:

  model.safetensors        BF16 weights with the official names
                           (block_sparse_moe.experts.E.w1/w2/w3 per expert,
                           FP32 block_sparse_moe.gate and e_score_correction_bias)
  config.json              the released field names (configs/minimax-m2.7.json)
  generation_config.json   bos/eos ids as the release has them (]~b] and [e~[)

The tokenizer files (tokenizer.json, tokenizer_config.json, chat_template.jinja)
are written by prepare.py into the same folder. The BF16/FP32 conversion is
tools/make_reference_fixtures.py's `stored_tensors`, the one the reference
fixtures use.
"""
import json
import os
import sys

from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from make_reference_fixtures import stored_tensors  # noqa: E402  (tools/make_reference_fixtures.py)


def official_weights(model, cfg):
    """transformers' state dict -> {official name: float32 tensor}."""
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    out = {}
    I = cfg["intermediate_size"]
    for name, t in sd.items():
        if "rotary_emb" in name:
            continue
        if ".mlp." not in name:
            out[name] = t
            continue
        prefix, rest = name.split(".mlp.")
        moe = prefix + ".block_sparse_moe."
        if rest == "gate.weight":
            out[moe + "gate.weight"] = t
        elif rest == "e_score_correction_bias":
            out[moe + "e_score_correction_bias"] = t
        elif rest == "experts.gate_up_proj":
            for e in range(t.shape[0]):  # [W1; W3] per expert, gate rows first
                out[f"{moe}experts.{e}.w1.weight"] = t[e, :I].contiguous()
                out[f"{moe}experts.{e}.w3.weight"] = t[e, I:].contiguous()
        elif rest == "experts.down_proj":
            for e in range(t.shape[0]):
                out[f"{moe}experts.{e}.w2.weight"] = t[e].contiguous()
        else:
            raise ValueError(f"unexpected tensor {name}")
    return out


def export(model, cfg, out_dir, bos_id, eos_id):
    """Writes the checkpoint files; returns {name: stored tensor}."""
    os.makedirs(out_dir, exist_ok=True)
    stored = stored_tensors(official_weights(model, cfg), fp8=False)
    save_file(stored, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    gen = {"bos_token_id": bos_id, "eos_token_id": eos_id, "do_sample": True,
           "temperature": 0.7, "top_p": 0.95, "top_k": 40}
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    return stored
