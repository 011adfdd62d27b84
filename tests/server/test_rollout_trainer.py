"""A Python "trainer" driving `m2cpp serve --enable-weight-updates` as its
rollout engine (docs/rollout.md), on the tiny chat model: generate, perturb
the weights, push them by disk (/update_weights_from_disk) and by
safetensors buckets (/update_weights_from_tensor), and check that the next
generation's logprobs are the float64 reference's (tools/w8a8_reference.py,
validated against transformers) for the new weights; bad updates (wrong
shape, dtype, unknown tensor, truncated bucket, incomplete set, FP8 pairs,
other models) are refused with a message and leave what is served as it was.

Bound: |logprob - float64| <= 2e-3 (the reference tests' logit bound is
5e-3; the CPU backend is ~1e-6 away with an fp32 KV cache)."""
import httpx
import numpy as np
import pytest

from live_server import MODEL_NAME, ServerProcess
from rollout_support import (perturbed, read_raw, reference_logprobs, safetensors_bytes, write_checkpoint)

BOUND = 2e-3
PROMPT = [11, 400, 73, 2001, 9, 57, 1200, 3]


@pytest.fixture(scope="module")
def server():
    s = ServerProcess("--enable-weight-updates")
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


def generate(server, prompt=PROMPT, max_tokens=8):
    r = httpx.post(server.url + "/v1/completions", timeout=60,
                   json={"model": MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                         "logprobs": 0, "ignore_eos": True, "return_tokens_as_token_ids": True})
    assert r.status_code == 200, r.text
    lp = r.json()["choices"][0]["logprobs"]
    ids = [int(t.split(":")[1]) for t in lp["tokens"]]
    return ids, lp["token_logprobs"]


def assert_reference(tensors, ids, logprobs):
    full = PROMPT + ids
    want = reference_logprobs(tensors, full)
    for i, (tok, got) in enumerate(zip(ids, logprobs)):
        exp = want[len(PROMPT) - 1 + i, tok]
        assert abs(got - exp) <= BOUND, (i, tok, got, exp)


def version(server):
    return httpx.get(server.url + "/get_model_info").json()["weights_version"]


def push_disk(server, path, **kw):
    return httpx.post(server.url + "/update_weights_from_disk", json={"model_path": str(path), **kw}, timeout=60)


def push_bucket(server, tensors, set_id, index, count, **params):
    return httpx.post(server.url + "/update_weights_from_tensor", content=safetensors_bytes(tensors), timeout=60,
                      params={"bucket_set": set_id, "bucket_index": index, "bucket_count": count, **params},
                      headers={"content-type": "application/octet-stream"})


def test_rollout_loop(server, tmp_path):
    base = read_raw()
    ids0, lp0 = generate(server)
    assert_reference(base, ids0, lp0)
    info = httpx.get(server.url + "/get_model_info").json()
    assert info["weights_version"] == 0 and info["config"]["num_local_experts"] == 4
    assert info["weight_updates_enabled"] is True and info["model_path"] == "m2-tiny-chat"

    # Step 1: a perturbed checkpoint in the official layout, pushed by disk.
    step1 = perturbed(base, seed=1)
    write_checkpoint(tmp_path / "step1", step1)
    r = push_disk(server, tmp_path / "step1", weight_version="step-1")
    assert r.status_code == 200, r.text
    assert r.json()["success"] and r.json()["weights_version"] == 1
    assert r.json()["num_tensors"] == len(base)
    ids1, lp1 = generate(server)
    assert_reference(step1, ids1, lp1)
    assert max(abs(a - b) for a, b in zip(lp0, lp1)) > 1e-3 or ids0 != ids1  # the weights did change
    info = httpx.get(server.url + "/get_model_info").json()
    assert info["weights_version"] == 1 and info["weight_version"] == "step-1"

    # Step 2: a subset of the tensors, in three buckets; nothing changes until the last.
    step2 = dict(step1)
    changed = perturbed({k: v for k, v in base.items() if ".layers.1." in k or k == "lm_head.weight"}, seed=2)
    step2.update(changed)
    names = sorted(changed)
    parts = [names[0::3], names[1::3], names[2::3]]
    for i, part in enumerate(parts[:2]):
        r = push_bucket(server, {n: changed[n] for n in part}, "step-2", i, 3)
        assert r.status_code == 200, r.text
        assert r.json()["complete"] is False and r.json()["received"] == i + 1
        assert version(server) == 1
    assert generate(server) == (ids1, lp1)  # the served weights are still step 1's, bit for bit
    r = push_bucket(server, {n: changed[n] for n in parts[2]}, "step-2", 2, 3)
    assert r.status_code == 200, r.text
    assert r.json()["weights_version"] == 2 and r.json()["num_tensors"] == len(names)
    ids2, lp2 = generate(server)
    assert_reference(step2, ids2, lp2)

    # Going back to the base weights by disk (the directory the server loaded).
    r = push_disk(server, server_model_dir())
    assert r.status_code == 200, r.text
    assert generate(server) == (ids0, lp0)
    assert version(server) == 3


def server_model_dir():
    from live_server import MODEL
    return MODEL


def test_bad_updates_change_nothing(server, tmp_path):
    base = read_raw()
    before_version = version(server)
    before = generate(server)
    norm = "model.layers.0.input_layernorm.weight"
    dtype, shape, raw = base[norm]

    def refused(r, needle, status=400):
        assert r.status_code == status, r.text
        assert needle in r.text, r.text
        assert version(server) == before_version
        assert generate(server) == before

    refused(push_bucket(server, {norm: (dtype, [shape[0] // 2], raw[: len(raw) // 2])}, "bad", 0, 1),
            f"tensor '{norm}': shape [32] but the served tensor is [64]")
    refused(push_bucket(server, {norm: ("F32", shape, np.ones(shape, np.float32).tobytes())}, "bad", 0, 1),
            "dtype F32 but the served tensor is BF16")
    refused(push_bucket(server, {"model.layers.7.input_layernorm.weight": base[norm]}, "bad", 0, 1),
            "'model.layers.7.input_layernorm.weight' is not a tensor of the served model")
    whole = safetensors_bytes({norm: base[norm]})
    r = httpx.post(server.url + "/update_weights_from_tensor", content=whole[:-5], timeout=30,
                   params={"bucket_set": "bad", "bucket_index": 0, "bucket_count": 1})
    refused(r, "bucket 0 of set 'bad'")
    r = httpx.post(server.url + "/update_weights_from_tensor", content=whole, timeout=30)
    refused(r, "bucket_set is missing")
    refused(push_bucket(server, {norm: base[norm]}, "bad", 3, 2), "bucket_index 3 is outside [0, bucket_count 2)")
    # An incomplete set is never applied; a second copy of a bucket drops it.
    r = push_bucket(server, {norm: base[norm]}, "half", 0, 2)
    assert r.status_code == 200 and r.json()["complete"] is False
    refused(push_bucket(server, {norm: base[norm]}, "half", 0, 2), "already received")
    r = push_bucket(server, {"model.norm.weight": base["model.norm.weight"]}, "half", 1, 2)
    assert r.status_code == 200 and r.json()["complete"] is False  # the set restarted: bucket 0 is missing again
    assert httpx.get(server.url + "/get_model_info").json()["pending_bucket_set"]["bucket_set"] == "half"
    refused(push_bucket(server, {"model.norm.weight": base["model.norm.weight"]}, "half", 0, 3),
            "bucket_count 3 differs")
    # Disk: a wrong shape in a checkpoint, another model's config, no directory.
    bad = dict(base)
    bad[norm] = (dtype, [shape[0] - 1], raw[:-2])
    write_checkpoint(tmp_path / "bad", bad)
    refused(push_disk(server, tmp_path / "bad"), "shape [63] but the served tensor is [64]")
    write_checkpoint(tmp_path / "other", base)
    cfg = (tmp_path / "other" / "config.json").read_text().replace('"hidden_size": 64', '"hidden_size": 96')
    (tmp_path / "other" / "config.json").write_text(cfg)
    refused(push_disk(server, tmp_path / "other"), "hidden_size is 96 but the served model's is 64")
    refused(push_disk(server, tmp_path / "nowhere"), "not a directory")
    refused(httpx.post(server.url + "/update_weights_from_disk", json={}), "model_path")
    refused(httpx.post(server.url + "/update_weights_from_disk", json={"model_path": 3}), "model_path")
    # Distributed updates depend on the many-GPU work.
    refused(httpx.post(server.url + "/init_weights_update_group", json={}), "many-GPU", status=501)
    refused(httpx.post(server.url + "/update_weights_from_distributed", json={}), "many-GPU", status=501)


def test_routes_need_the_flag_and_the_key():
    plain = ServerProcess()
    try:
        r = httpx.post(plain.url + "/update_weights_from_disk", json={"model_path": "x"})
        assert r.status_code == 404 and "--enable-weight-updates" in r.text
        assert httpx.post(plain.url + "/pause_generation", json={}).status_code == 404
        assert httpx.get(plain.url + "/get_model_info").json()["weights_version"] == 0
    finally:
        assert plain.stop() == 0
    keyed = ServerProcess("--enable-weight-updates", "--api-key", "user", "--admin-api-key", "admin")
    try:
        url = keyed.url + "/continue_generation"
        assert httpx.post(url, json={}).status_code == 401
        assert httpx.post(url, json={}, headers={"authorization": "Bearer user"}).status_code == 401
        assert httpx.post(url, json={}, headers={"authorization": "Bearer admin"}).status_code == 200
        assert httpx.get(keyed.url + "/get_model_info").status_code == 401
        assert httpx.get(keyed.url + "/get_model_info", headers={"authorization": "Bearer user"}).status_code == 200
        assert httpx.get(url, headers={"authorization": "Bearer admin"}).status_code == 405
    finally:
        assert keyed.stop() == 0


def test_update_while_generating_swaps_between_steps(tmp_path):
    """Without a pause, an update lands between two steps: the request in flight finishes (its later tokens
    from the new weights), nothing fails, and the next request is the new weights' alone."""
    import concurrent.futures
    from live_server import wait_for
    s = ServerProcess("--enable-weight-updates", "--step-delay-ms", "10")
    try:
        base = read_raw()
        step1 = perturbed(base, seed=5)
        write_checkpoint(tmp_path / "s1", step1)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(generate, s, PROMPT, 200)
            assert wait_for(lambda: (s.metric("m2cpp:num_requests_running") or 0) >= 1)
            r = push_disk(s, tmp_path / "s1")
            assert r.status_code == 200, r.text
            ids, lps = fut.result(timeout=120)
        assert len(ids) == 200 and all(lp <= 0 for lp in lps)
        ids1, lp1 = generate(s)
        assert_reference(step1, ids1, lp1)
    finally:
        assert s.stop() == 0, s.log_text()[-4000:]
