"""Helpers of the rollout tests (test_rollout*.py): the tiny chat model's
tensors as raw bytes, perturbed copies written as checkpoints in the
official layout or as safetensors buckets, the float64 reference
(tools/w8a8_reference.py) over those tensors, and the routed-experts codec."""
import base64
import json
import os
import shutil
import struct
import sys

import numpy as np

from live_server import MODEL, SOURCE_DIR

sys.path.insert(0, os.path.join(SOURCE_DIR, "tools"))
import w8a8_reference as ref  # noqa: E402 (after the path it is found on)

DTYPE_SIZE = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1}


def read_raw(path=os.path.join(MODEL, "model.safetensors")):
    """{name: (dtype, shape, bytes)} of one safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], data[b:e])
    return out


def safetensors_bytes(tensors, metadata=None):
    """The bytes of a safetensors file holding `tensors` {name: (dtype, shape, bytes)}."""
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def to_f32(dtype, raw):
    if dtype == "F32":
        return np.frombuffer(raw, "<f4").astype(np.float32)
    assert dtype == "BF16", dtype
    return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)


def from_f32(dtype, values):
    values = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "F32":
        return values.astype("<f4").tobytes()
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
    return rounded.astype("<u2").tobytes()


def perturbed(tensors, seed, scale=0.05):
    """Every tensor times (1 + scale * N(0, 1)), in its own dtype (a trainer's step)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, (dtype, shape, raw) in tensors.items():
        v = to_f32(dtype, raw)
        out[name] = (dtype, shape, from_f32(dtype, v * (1 + scale * rng.standard_normal(v.shape)).astype(np.float32)))
    return out


def write_checkpoint(dir_path, tensors):
    """A checkpoint in the official layout: the model's config.json and one model.safetensors."""
    os.makedirs(dir_path, exist_ok=True)
    shutil.copy(os.path.join(MODEL, "config.json"), os.path.join(dir_path, "config.json"))
    with open(os.path.join(dir_path, "model.safetensors"), "wb") as f:
        f.write(safetensors_bytes(tensors))


_KEEP = []  # the reference caches dequantised weights by id(): keep every dict alive


def reference_logprobs(tensors, ids, forced=None, routed=None):
    """float64 log-softmax [len(ids), vocab] of the reference forward over `tensors`."""
    with open(os.path.join(MODEL, "config.json")) as f:
        cfg = json.load(f)
    t = {}
    for name, (dtype, shape, raw) in tensors.items():
        t[name] = to_f32(dtype, raw).astype(np.float64).reshape(shape)
    _KEEP.append(t)
    logits = ref.forward(cfg, t, ids, forced=forced, routed=routed)
    m = logits.max(axis=1, keepdims=True)
    return logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))


def decode_routed(obj):
    """routed_experts / routing_replay JSON -> int array [positions, layers, top_k]."""
    assert obj["encoding"] == "base64"
    dt = {"uint8": np.uint8, "uint16": "<u2"}[obj["dtype"]]
    return np.frombuffer(base64.b64decode(obj["data"]), dt).astype(np.int64).reshape(obj["shape"])


def encode_routed(ids):
    ids = np.asarray(ids)
    return {"encoding": "base64", "dtype": "uint8", "shape": list(ids.shape),
            "data": base64.b64encode(ids.astype(np.uint8).tobytes()).decode()}
