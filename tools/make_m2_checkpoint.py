#!/usr/bin/env python3
"""Writes a MiniMax-M2 checkpoint of random weights in the official layout, at
any number of layers of the real shape (or a smaller shape through --set), fast
enough to make tens of GB for a load test (scripts/gpu_load_check.sh).

Layout as released (../shared/docs/m2-spec.md §3): model-XXXXX-of-NNNNN.safetensors
shards of about --shard-gb each, filled in model order (the embedding in the
first shard, model.norm and lm_head in the last) + model.safetensors.index.json
+ config.json with its quantization_config. FP8 e4m3 projection and expert
weights with fp32 weight_scale_inv [ceil(out/128), ceil(in/128)], BF16
embedding, norms and lm_head, FP32 router gate and e_score_correction_bias.
Inside a shard the data is ordered as the safetensors library orders it (dtype
from widest to narrowest, then name), so the fp32 tensors of a layer come
first and its FP8 weights after them, in name order.

Values: every random byte is drawn from one pool masked with 0xBF, which
clears the top exponent bit of FP8 e4m3 and BF16 (and FP32) numbers: no NaN,
no infinity, magnitudes below 2. Norms are 1, scales 2^-8. Each shard is
synced and dropped from the page cache after it is written (posix_fadvise),
so that a load right after reads it from the disk.

    tools/make_m2_checkpoint.py --layers 12 --out /data/m2-12l
    tools/make_m2_checkpoint.py --layers 2 --out /tmp/m2-tiny --set hidden_size=256 \\
        --set intermediate_size=128 --set num_local_experts=8 --set vocab_size=1024
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POOL_BYTES = 256 << 20
# The safetensors library's dtype order (widest first, in its sort), and sizes.
DTYPE_RANK = {"F32": 2, "BF16": 1, "F8_E4M3": 0}
DTYPE_SIZE = {"F32": 4, "BF16": 2, "F8_E4M3": 1}


def tensor_list(cfg):
    """(name, dtype, shape, kind) in model order; kind: random, ones, scale, normal."""
    H, I, V, E = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_local_experts"]
    q_dim = cfg["num_attention_heads"] * cfg["head_dim"]
    kv_dim = cfg["num_key_value_heads"] * cfg["head_dim"]
    fp8 = "quantization_config" in cfg
    blk = cfg.get("quantization_config", {}).get("weight_block_size", [128, 128])
    out = [("model.embed_tokens.weight", "BF16", [V, H], "random")]

    def linear(name, rows, cols):
        if not fp8:
            return [(name + ".weight", "BF16", [rows, cols], "random")]
        return [(name + ".weight", "F8_E4M3", [rows, cols], "random"),
                (name + ".weight_scale_inv", "F32", [math.ceil(rows / blk[0]), math.ceil(cols / blk[1])], "scale")]

    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        out += linear(p + "self_attn.q_proj", q_dim, H)
        out += linear(p + "self_attn.k_proj", kv_dim, H)
        out += linear(p + "self_attn.v_proj", kv_dim, H)
        out += linear(p + "self_attn.o_proj", H, q_dim)
        if cfg.get("use_qk_norm", True):
            out.append((p + "self_attn.q_norm.weight", "BF16", [q_dim], "ones"))
            out.append((p + "self_attn.k_norm.weight", "BF16", [kv_dim], "ones"))
        out.append((p + "block_sparse_moe.gate.weight", "F32", [E, H], "normal"))
        for e in range(E):
            ep = f"{p}block_sparse_moe.experts.{e}."
            out += linear(ep + "w1", I, H)
            out += linear(ep + "w2", H, I)
            out += linear(ep + "w3", I, H)
        if cfg.get("use_routing_bias", True):
            out.append((p + "block_sparse_moe.e_score_correction_bias", "F32", [E], "normal"))
        out.append((p + "input_layernorm.weight", "BF16", [H], "ones"))
        out.append((p + "post_attention_layernorm.weight", "BF16", [H], "ones"))
    out.append(("model.norm.weight", "BF16", [H], "ones"))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", "BF16", [V, H], "random"))
    return out


def nbytes(t):
    return math.prod(t[2]) * DTYPE_SIZE[t[1]]


def shard_plan(tensors, shard_bytes):
    """Consecutive tensors, a new shard when the next would overflow one."""
    shards, cur, size = [], [], 0
    for t in tensors:
        if cur and size + nbytes(t) > shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += nbytes(t)
    shards.append(cur)
    return shards


class Source:
    """Bytes for tensors: slices of one random pool, or computed small arrays."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        pool = np.frombuffer(self.rng.bytes(POOL_BYTES), dtype=np.uint8).copy()
        np.bitwise_and(pool, 0xBF, out=pool)
        self.pool = memoryview(pool)

    def write(self, f, t):
        name, dtype, shape, kind = t
        n = nbytes(t)
        if kind == "random":
            done = 0
            while done < n:
                k = min(n - done, POOL_BYTES // 2)
                off = int(self.rng.integers(0, POOL_BYTES - k + 1))
                f.write(self.pool[off:off + k])
                done += k
        elif kind == "ones":  # BF16 1.0
            f.write(np.full(math.prod(shape), 0x3F80, dtype="<u2").tobytes())
        elif kind == "scale":
            f.write(np.full(math.prod(shape), 2.0 ** -8, dtype="<f4").tobytes())
        else:  # normal
            f.write((self.rng.standard_normal(math.prod(shape), dtype=np.float32) * 0.02).astype("<f4").tobytes())


def write_shard(path, tensors, source):
    order = sorted(tensors, key=lambda t: (-DTYPE_RANK[t[1]], t[0]))
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape, _ in order:
        n = math.prod(shape) * DTYPE_SIZE[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for t in order:
            source.write(f, t)
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return 8 + len(h) + off


def parse_set(items):
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        if not key or not value:
            sys.exit(f"--set {item!r}: expected KEY=JSON_VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="checkpoint directory (created; must be empty or absent)")
    ap.add_argument("--layers", type=int, required=True, help="decoder layers")
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "minimax-m2.7.json"))
    ap.add_argument("--shard-gb", type=float, default=1.84, help="shard size in GB (M2.7's are ~1.84)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config.json override")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    with open(args.config) as f:
        cfg = json.load(f)
    cfg.update(parse_set(args.set))
    cfg["num_hidden_layers"] = args.layers
    cfg["attn_type_list"] = [1] * args.layers
    os.makedirs(args.out, exist_ok=True)
    if os.listdir(args.out):
        sys.exit(f"{args.out}: not empty")

    tensors = tensor_list(cfg)
    shards = shard_plan(tensors, int(args.shard_gb * 1e9))
    source = Source(args.seed)
    weight_map, total, file_bytes, t0 = {}, 0, 0, time.time()
    for i, shard in enumerate(shards):
        fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        file_bytes += write_shard(os.path.join(args.out, fname), shard, source)
        for t in shard:
            weight_map[t[0]] = fname
            total += nbytes(t)
        print(f"  {fname}: {len(shard)} tensors, {file_bytes / 1e9:.1f} GB so far, "
              f"{file_bytes / 1e9 / (time.time() - t0):.2f} GB/s", file=sys.stderr, flush=True)
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    s = time.time() - t0
    print(f"wrote {args.out}: {args.layers} layers, {len(tensors)} tensors in {len(shards)} shards, "
          f"{file_bytes / 1e9:.2f} GB ({file_bytes / 2**30:.2f} GiB) in {s:.1f} s ({file_bytes / 1e9 / s:.2f} GB/s)")


if __name__ == "__main__":
    main()
