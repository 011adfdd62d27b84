"""tools/w8a8_reference.py, the float64 reference of the FP8 serving numerics,
checked against independent references: with quantisation off it must give
transformers' own float64 logits (tests/data/reference, made by
tools/make_reference_fixtures.py); its e4m3 rounding must be ml_dtypes'
(a separate implementation of float8_e4m3fn) on every in-range value."""
import json
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import w8a8_reference as ref  # noqa: E402


def fixture(variant):
    cfg, tensors = ref.load_checkpoint(os.path.join(ROOT, "tests", "data", variant))
    d = os.path.join(ROOT, "tests", "data", "reference", variant)
    with open(os.path.join(d, "prompt.json")) as f:
        ids = json.load(f)["prompt_ids"]
    return cfg, tensors, ids, np.load(os.path.join(d, "logits.npy"))


@pytest.mark.parametrize("variant", ["m2-tiny-fp8", "m2-tiny-bf16"])
def test_unquantised_equals_transformers_float64(variant):
    cfg, tensors, ids, want = fixture(variant)
    got = ref.forward(cfg, tensors, ids, "none")
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-10 * max(1.0, np.abs(want).max())


def test_dynamic_quantisation_moves_fp8_logits_and_leaves_bf16_alone():
    cfg, tensors, ids, want = fixture("m2-tiny-fp8")
    got = ref.forward(cfg, tensors, ids[:64], "dynamic")
    d = np.abs(got - want[:64])
    # e4m3 activations (3 mantissa bits) move the logits, but stay near them
    assert 1e-3 < np.sqrt(np.mean(d * d)) < 0.5
    cfg, tensors, ids, want = fixture("m2-tiny-bf16")  # no FP8 linears: nothing to quantise
    assert np.abs(ref.forward(cfg, tensors, ids[:32], "dynamic") - want[:32]).max() <= 1e-10


def test_e4m3_table_and_rounding_match_ml_dtypes():
    ml = pytest.importorskip("ml_dtypes")
    codes = np.arange(256, dtype=np.uint8)
    theirs = codes.view(ml.float8_e4m3fn).astype(np.float64)
    assert np.array_equal(np.isnan(theirs), np.isnan(ref.E4M3))
    assert np.array_equal(theirs[~np.isnan(theirs)], ref.E4M3[~np.isnan(ref.E4M3)])
    rng = np.random.default_rng(5)
    finite = ref.E4M3[np.isfinite(ref.E4M3)]
    mids = (np.sort(finite)[1:] + np.sort(finite)[:-1]) / 2  # every tie
    x = np.concatenate([rng.uniform(-448, 448, 200000), rng.normal(0, 1e-2, 100000), finite, mids,
                        np.nextafter(mids, 0), np.nextafter(mids, 1e9), [0.0, -0.0, 448.0, -448.0]])
    x = x[np.abs(x) <= 448]
    assert np.array_equal(ref.round_e4m3(x), x.astype(ml.float8_e4m3fn).astype(np.float64))
    # saturating above the range (the GPU's __NV_SATFINITE), where ml_dtypes gives NaN
    assert np.array_equal(ref.round_e4m3(np.array([500.0, -1e9])), [448.0, -448.0])


def test_group_quantisation_rule():
    rng = np.random.default_rng(9)
    x = rng.normal(0, 3, (7, 384)) * np.array([1e-20, 1.0, 1e20])[:, None].repeat(128, 1).reshape(1, 384)
    x[2, 128:256] = 0.0  # an all-zero group stays zero
    q = ref.quantize_act(x)
    for g in range(3):
        blk, qb = x[:, 128 * g:128 * (g + 1)], q[:, 128 * g:128 * (g + 1)]
        scale = np.abs(blk).max(axis=1, keepdims=True) / 448
        scale[scale == 0] = 1
        codes = qb / scale
        # every value is an e4m3 value times its group's scale (to the rounding of the division)
        assert np.allclose(codes, ref.round_e4m3(codes), rtol=1e-12, atol=0)
        assert np.allclose(np.abs(codes).max(axis=1)[np.abs(blk).max(axis=1) > 0], 448, rtol=1e-12)  # amax -> 448
        assert np.all(np.abs(qb - blk) <= np.abs(blk) / 16 + 2.0 ** -10 * scale)  # 3 mantissa bits (or subnormal)
    assert np.all(q[2, 128:256] == 0)
    assert np.allclose(ref.quantize_act(q), q, rtol=1e-12, atol=0)  # idempotent
