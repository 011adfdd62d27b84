#!/usr/bin/env python3
"""Trains the m2cpp demo model: transformers' MiniMaxM2ForCausalLM, small.

    python3 tools/demo_model/train.py --out OUT_DIR [--time-budget 400]

Reads the token ids that prepare.py wrote (tools/demo_model/data/*.u16.xz),
trains for a fixed wall-clock budget (the learning-rate schedule follows the
elapsed fraction of it, so the run ends on time on any GPU), then writes:

  OUT_DIR/m2-demo/          the checkpoint in the official layout (export.py)
                            plus the tokenizer files from models/m2-demo/
  OUT_DIR/log.jsonl         one line per logged step: tokens, losses, lr, load
  OUT_DIR/loss.svg          the loss curve (also copied into the model folder)
  OUT_DIR/samples.txt       answers of the exported checkpoint to a few prompts

Model (MINI_CONFIG): 6 layers, hidden 256, 8 query heads x 64 with 2 kv heads
(q width 512 = 2 x hidden, like the real model's 6144 = 2 x 3072), partial
rotary 32 of 64, full-width QK RMSNorm (use_qk_norm, per_layer), 8 experts of
width 192 with top-2 sigmoid routing and a correction bias, vocab 8192.

Precision: FP32 master weights and AdamW state, BF16 autocast for the matmuls
on CUDA, the router (gate GEMM + sigmoid + top-k) kept in FP32 as the
released model and m2cpp run it.

Routing balance: transformers keeps e_score_correction_bias as a buffer that
no gradient reaches. We update it as DeepSeek-V3 / MiniMax's aux-loss-free
balancing does: after every step, for each layer,
    bias_e += gamma * sign(mean_load - load_e)
where load_e is the number of tokens routed to expert e in that step. The
bias therefore ends non-zero and meaningful: it is what keeps the experts
evenly loaded at inference.
"""
import argparse
import json
import lzma
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools"))

from transformers import MiniMaxM2Config, MiniMaxM2ForCausalLM  # noqa: E402
from transformers.models.minimax_m2 import modeling_minimax_m2 as mm  # noqa: E402

import chat_template_ref  # noqa: E402
import export  # noqa: E402
import loss_plot  # noqa: E402

LAYERS = 6
MINI_CONFIG = {  # field names and order as in configs/minimax-m2.7.json
    "architectures": ["MiniMaxM2ForCausalLM"],
    "attn_type_list": [1] * LAYERS,
    "dtype": "bfloat16",
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 256,
    "intermediate_size": 192,
    "max_position_embeddings": 4096,
    "model_type": "minimax_m2",
    "mtp_transformer_layers": 1,
    "num_attention_heads": 8,
    "num_experts_per_tok": 2,
    "num_hidden_layers": LAYERS,
    "num_key_value_heads": 2,
    "num_local_experts": 8,
    "num_mtp_modules": 0,
    "qk_norm_type": "per_layer",
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000,
    "rotary_dim": 32,
    # Not in the released config.json: transformers up to 5.17 ignores
    # rotary_dim and would rotate all 64 dims; this field says 32/64 to every version.
    "partial_rotary_factor": 0.5,
    "scoring_func": "sigmoid",
    "shared_intermediate_size": 0,
    "tie_word_embeddings": False,
    "use_cache": True,
    "use_mtp": False,
    "use_qk_norm": True,
    "use_routing_bias": True,
    "vocab_size": 8192,
    # Absent from the released config.json; transformers' defaults are the ids
    # of ]~!b[ and [e~[ in M2's vocabulary, so these are ours for the same tokens.
    "bos_token_id": 8162,
    "eos_token_id": 8148,
}
NO_LOSS = 0x8000
BOS, EOS, MSG = "]~!b[", "[e~[", "]~b]"

SAMPLE_PROMPTS = [
    [{"role": "user", "content": "Tell me about the sea."}],
    [{"role": "user", "content": "What is a cat?"}],
    [{"role": "user", "content": "Tell me a short story about a fox."}],
    [{"role": "user", "content": "Who are you?"}],
    [{"role": "user", "content": "What does \"happy\" mean?"}],
    [{"role": "user", "content": "What is 7 plus 5?"}],
    [{"role": "user", "content": "Tell me about Paris."}],
    [{"role": "user", "content": "What is the weather like in Rome?"}],
]
SAMPLE_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}}]


# ---- model ------------------------------------------------------------------------------


def hf_config(cfg):
    # MTP fields describe modules that no checkpoint has; transformers would act on them.
    skip = ("dtype", "torch_dtype", "use_mtp", "num_mtp_modules", "mtp_transformer_layers")
    return MiniMaxM2Config(**{k: v for k, v in cfg.items() if k not in skip})


def fp32_router():
    """Runs transformers' router outside autocast, in FP32 (gate weights are FP32)."""
    forward = mm.MiniMaxM2TopKRouter.forward

    def router_forward(self, hidden_states, *args, **kwargs):
        with torch.autocast(device_type=hidden_states.device.type, enabled=False):
            return forward(self, hidden_states.float(), *args, **kwargs)

    mm.MiniMaxM2TopKRouter.forward = router_forward


class LoadBalancer:
    """Counts tokens per expert (forward hooks on the routers) and moves
    e_score_correction_bias against the imbalance after each step."""

    def __init__(self, model, gamma):
        self.gamma = gamma
        self.blocks = [layer.mlp for layer in model.model.layers]
        E = self.blocks[0].e_score_correction_bias.numel()
        dev = self.blocks[0].e_score_correction_bias.device
        self.counts = torch.zeros(len(self.blocks), E, device=dev)
        for i, block in enumerate(self.blocks):
            block.gate.register_forward_hook(self._hook(i))

    def _hook(self, i):
        def hook(module, inputs, output):
            if module.training:
                top_k_index = output[2]
                self.counts[i] += torch.bincount(top_k_index.flatten(), minlength=self.counts.shape[1])
        return hook

    @torch.no_grad()
    def step(self):
        """Updates the biases; returns the max/mean load ratio over layers."""
        mean = self.counts.mean(dim=1, keepdim=True)
        for i, block in enumerate(self.blocks):
            block.e_score_correction_bias += self.gamma * torch.sign(mean[i] - self.counts[i])
        imbalance = (self.counts.max(dim=1).values / mean.squeeze(1)).max().item()
        self.counts.zero_()
        return imbalance


# ---- data --------------------------------------------------------------------------------


def load_ids(path):
    with lzma.open(path, "rb") as f:
        return torch.from_numpy(np.frombuffer(f.read(), dtype=np.uint16).astype(np.int32))


class Batches:
    """Random windows of seq_len+1 tokens; a fraction chat_frac from the chat stream."""

    def __init__(self, text, chat, seq_len, chat_frac, device, seed):
        self.streams = [text.to(device), chat.to(device)]
        self.seq_len, self.chat_frac, self.device = seq_len, chat_frac, device
        self.gen = torch.Generator(device="cpu").manual_seed(seed)

    def next(self, batch):
        is_chat = torch.rand(batch, generator=self.gen) < self.chat_frac
        rows = []
        for c in is_chat.tolist():
            s = self.streams[int(c)]
            start = torch.randint(0, len(s) - self.seq_len - 1, (1,), generator=self.gen).item()
            rows.append(s[start:start + self.seq_len + 1])
        return split(torch.stack(rows))


def split(window):
    ids = (window & (NO_LOSS - 1)).long()
    inputs, targets = ids[:, :-1], ids[:, 1:].clone()
    targets[(window[:, 1:] & NO_LOSS) != 0] = -100
    return inputs, targets


def fixed_windows(stream, n, seq_len):
    """n evenly spaced windows: the same validation batch every time."""
    starts = torch.linspace(0, len(stream) - seq_len - 2, n).long()
    return split(torch.stack([stream[s:s + seq_len + 1] for s in starts.tolist()]))


# ---- training ----------------------------------------------------------------------------


def loss_fn(model, inputs, targets, amp):
    with torch.autocast(device_type=inputs.device.type, dtype=torch.bfloat16, enabled=amp):
        logits = model(input_ids=inputs, use_cache=False).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)


@torch.no_grad()
def evaluate(model, val, amp):
    model.eval()
    out = {}
    for name, (inp, tgt) in val.items():
        losses = [loss_fn(model, inp[i:i + 8], tgt[i:i + 8], amp).item() for i in range(0, len(inp), 8)]
        out[name] = sum(losses) / len(losses)
    model.train()
    return out


def pick_experts_impl(model, batch, amp, choice):
    """transformers' experts implementation: 'grouped_mm' when it runs (and
    agrees with 'eager') and is faster, else 'eager'."""
    if choice != "auto":
        model.config._experts_implementation = choice
        return choice
    inp, tgt = batch
    timings, losses = {}, {}
    for impl in ("eager", "grouped_mm"):
        model.config._experts_implementation = impl
        try:
            for i in range(3):
                if i == 1:
                    if inp.is_cuda:
                        torch.cuda.synchronize()
                    t = time.time()
                loss = loss_fn(model, inp, tgt, amp)
                loss.backward()
            if inp.is_cuda:
                torch.cuda.synchronize()
            timings[impl], losses[impl] = (time.time() - t) / 2, loss.item()
        except Exception as e:  # not every torch build has a grouped_mm kernel for this case
            print(f"experts implementation {impl}: unavailable ({type(e).__name__}: {e})")
        model.zero_grad(set_to_none=True)
    best = "eager"
    if "grouped_mm" in timings and abs(losses["grouped_mm"] - losses["eager"]) < 1e-2 \
            and timings["grouped_mm"] < timings["eager"]:
        best = "grouped_mm"
    print(f"experts implementation: {best} (step seconds {timings}, losses {losses})")
    model.config._experts_implementation = best
    return best


def lr_at(progress, step, peak, warmup_steps, final_frac=0.1):
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    return peak * (final_frac + (1 - final_frac) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def train(args):
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    amp = device.type == "cuda"
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    fp32_router()

    data = {n: load_ids(os.path.join(args.data, f"{n}.u16.xz")) for n in ("text", "chat", "val_text", "val_chat")}
    config = hf_config(MINI_CONFIG)
    config._attn_implementation = "sdpa"
    model = MiniMaxM2ForCausalLM(config).to(device).train()
    rotated = 2 * model.model.rotary_emb.inv_freq.numel()
    assert rotated == MINI_CONFIG["rotary_dim"], f"transformers rotates {rotated} dims, not rotary_dim"
    n_params = sum(p.numel() for p in model.parameters())
    print(f"parameters: {n_params / 1e6:.2f} M on {device}, tokens: text {len(data['text'])}, chat {len(data['chat'])}")

    batches = Batches(data["text"], data["chat"], args.seq_len, args.chat_frac, device, args.seed)
    val = {n: tuple(t.to(device) for t in fixed_windows(data[n], args.val_windows, args.seq_len))
           for n in ("val_text", "val_chat")}
    impl = pick_experts_impl(model, batches.next(args.batch), amp, args.experts_impl)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "gate.weight" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "gate.weight" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda")
    balancer = LoadBalancer(model, args.bias_gamma)

    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "log.jsonl"), "w")
    start = time.time()
    step, tokens, recent, last_eval, imbalance = 0, 0, [], -1e9, float("nan")
    while True:
        elapsed = time.time() - start
        progress = elapsed / args.time_budget
        if progress >= 1.0 or (args.max_steps and step >= args.max_steps):
            break
        lr = lr_at(progress, step, args.lr, args.warmup_steps)
        for g in opt.param_groups:
            g["lr"] = lr
        inputs, targets = batches.next(args.batch)
        loss = loss_fn(model, inputs, targets, amp)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        imbalance = balancer.step()
        step += 1
        tokens += inputs.numel()
        recent.append(loss.item())
        if step % args.log_every == 0 or elapsed - last_eval > args.eval_every:
            entry = {"step": step, "seconds": round(time.time() - start, 1), "tokens": tokens,
                     "train_loss": sum(recent) / len(recent), "lr": lr, "grad_norm": float(grad_norm),
                     "max_load_ratio": imbalance}
            recent = []
            if elapsed - last_eval > args.eval_every:
                entry.update(evaluate(model, val, amp))
                last_eval = elapsed
            log.write(json.dumps(entry) + "\n")
            log.flush()
            print(json.dumps(entry), flush=True)
    final = {"step": step, "seconds": round(time.time() - start, 1), "tokens": tokens, "final": True,
             "max_load_ratio": imbalance, **evaluate(model, val, amp)}
    log.write(json.dumps(final) + "\n")
    log.close()
    print(json.dumps(final), flush=True)
    return model, {"parameters": n_params, "experts_implementation": impl, "args": vars(args), **final}


# ---- export, checks and samples ------------------------------------------------------------


def render_prompt(messages, tools=None):
    with open(os.path.join(REPO, "models/m2-demo/chat_template.jinja"), encoding="utf-8") as f:
        source = f.read()
    return chat_template_ref.render(source, messages, tools=tools, add_generation_prompt=True)


@torch.no_grad()
def sample(model, tok, prompt, max_new, temperature, gen):
    """Plain sampling loop (no KV cache: short prompts, small model)."""
    ids = tok.encode(prompt, add_special_tokens=False).ids
    eos = tok.token_to_id(EOS)
    out = []
    for _ in range(max_new):
        logits = model(input_ids=torch.tensor([ids + out], device=next(model.parameters()).device),
                       use_cache=False).logits[0, -1].float()
        logits[MINI_CONFIG["vocab_size"] - 10:] = -float("inf")  # rows without a token
        if temperature == 0:
            nxt = int(logits.argmax())
        else:
            probs = torch.softmax(logits / temperature, dim=-1).cpu()
            nxt = int(torch.multinomial(probs, 1, generator=gen))
        if nxt == eos:
            break
        out.append(nxt)
    return tok.decode(out, skip_special_tokens=False)


def finish(model, summary, args):
    from tokenizers import Tokenizer

    model_dir = os.path.join(args.out, "m2-demo")
    src_dir = os.path.join(REPO, "models/m2-demo")
    os.makedirs(model_dir, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(src_dir, name), model_dir)
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    assert (tok.token_to_id(BOS), tok.token_to_id(EOS)) == (MINI_CONFIG["bos_token_id"], MINI_CONFIG["eos_token_id"])
    model = model.float().eval()
    export.export(model, MINI_CONFIG, model_dir, bos_id=tok.token_to_id(MSG), eos_id=tok.token_to_id(EOS))
    loss_plot.write_svg(os.path.join(args.out, "log.jsonl"), os.path.join(args.out, "loss.svg"))
    shutil.copy(os.path.join(args.out, "loss.svg"), os.path.join(model_dir, "loss.svg"))
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)

    # The written files, loaded back by transformers, must give the in-memory
    # model's logits once its weights are rounded to BF16 (router kept FP32).
    # The samples come from the loaded files; if loading fails, from the
    # rounded in-memory model, and the failure is reported.
    device = next(model.parameters()).device
    model.config._experts_implementation = "eager"
    with torch.no_grad():
        for n, p in model.named_parameters():
            if ".gate." not in n:
                p.copy_(p.to(torch.bfloat16).float())
    loaded = model
    try:
        loaded = MiniMaxM2ForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device).eval()
        loaded.config._experts_implementation = "eager"
        probe = tok.encode(render_prompt(SAMPLE_PROMPTS[0]), add_special_tokens=False).ids
        probe = torch.tensor([probe], device=device)
        with torch.no_grad():
            diff = loaded(input_ids=probe, use_cache=False).logits - model(input_ids=probe, use_cache=False).logits
        summary["reload_max_abs_logit_diff"] = diff.abs().max().item()
        print(f"reloaded checkpoint: max |logit diff| vs the trained model = {summary['reload_max_abs_logit_diff']:.2e}")
    except Exception as e:  # keep the run's output; the post-run reference step checks the layout again
        summary["reload_error"] = f"{type(e).__name__}: {e}"
        print(f"reloading the checkpoint failed: {summary['reload_error']}")

    gen = torch.Generator().manual_seed(0)
    with open(os.path.join(args.out, "samples.txt"), "w") as f:
        for messages in SAMPLE_PROMPTS:
            tools = SAMPLE_TOOLS if "weather" in messages[-1]["content"] else None
            prompt = render_prompt(messages, tools)
            for temperature in (0.0, 0.7):
                text = sample(loaded, tok, prompt, args.sample_tokens, temperature, gen)
                block = f"### {messages[-1]['content']}  (temperature {temperature})\n<think>\n{text}\n"
                f.write(block + "\n")
                print(block, flush=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--time-budget", type=float, default=400, help="seconds of training")
    ap.add_argument("--max-steps", type=int, default=0, help="stop earlier (0: only the time budget)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--chat-frac", type=float, default=0.85, help="share of windows from the chat stream")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup-steps", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--bias-gamma", type=float, default=2e-3, help="correction-bias update speed")
    ap.add_argument("--experts-impl", default="auto", choices=["auto", "eager", "grouped_mm"])
    ap.add_argument("--val-windows", type=int, default=32)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=float, default=30, help="seconds between validation passes")
    ap.add_argument("--sample-tokens", type=int, default=160)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    model, summary = train(args)
    finish(model, summary, args)


if __name__ == "__main__":
    main()
