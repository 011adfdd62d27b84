"""Rollout control and agreement (docs/rollout.md) through a live `m2cpp
serve --enable-weight-updates` on the tiny chat model:

- pause_generation in each mode (abort, wait, in_place, retract), requests
  held while paused, continue_generation, flush_cache's rule;
- logprobs returned while sampling equal, bit for bit, those of re-scoring
  the same sequence through /v1/completions with echo (the CPU backend is
  batch-invariant), and the float64 reference within 2e-3;
- return_routed_experts (completions and chat, token-id prompts): the
  experts every position ran with, equal to the float64 reference's choice;
  routing_replay of them changes nothing, bit for bit; replaying another
  routing matches the float64 reference forced to that routing.

Generation speed for the pause tests comes from --step-delay-ms."""
import concurrent.futures
import time

import httpx
import numpy as np
import pytest

from live_server import MODEL_NAME, ServerProcess, wait_for
from rollout_support import decode_routed, encode_routed, read_raw, reference_logprobs

BOUND = 2e-3
PROMPT = [21, 300, 5, 1999, 42, 7, 818, 64, 3001, 12]


@pytest.fixture(scope="module")
def server():
    s = ServerProcess("--enable-weight-updates", "--step-delay-ms", "15")
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


def complete(server, **kw):
    body = {"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 6, "temperature": 0, "ignore_eos": True, **kw}
    r = httpx.post(server.url + "/v1/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def post(server, path, body=None):
    return httpx.post(server.url + path, json=body or {}, timeout=120)


def running(server):
    return server.metric("m2cpp:num_requests_running") or 0


# ---- pause / continue / flush ---------------------------------------------------------------------------

def test_pause_abort_ends_requests_with_their_tokens(server):
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        fut = pool.submit(complete, server, max_tokens=500)
        assert wait_for(lambda: running(server) >= 1)
        time.sleep(0.2)
        r = post(server, "/pause_generation", {"mode": "abort"})
        assert r.status_code == 200 and r.json()["num_requests"] == 1, r.text
        choice = fut.result(timeout=30)
        assert choice["finish_reason"] == "abort" and choice["text"]
        # While paused new requests wait; they run after continue_generation.
        held = pool.submit(complete, server, max_tokens=3)
        time.sleep(0.5)
        assert not held.done()
        assert httpx.get(server.url + "/get_model_info").json()["generation_paused"] is True
        r = post(server, "/continue_generation")
        assert r.json()["was_paused"] is True
        assert held.result(timeout=30)["finish_reason"] == "length"
    assert post(server, "/continue_generation").json()["was_paused"] is False


@pytest.mark.parametrize("mode", ["wait", "in_place", "retract"])
def test_pause_modes_keep_requests(server, mode):
    base = complete(server, max_tokens=150, logprobs=0)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fut = pool.submit(complete, server, max_tokens=150, logprobs=0)
        assert wait_for(lambda: running(server) >= 1)
        r = post(server, "/pause_generation", {"mode": mode})
        assert r.status_code == 200, r.text
        if mode == "wait":
            assert r.json()["num_requests"] == 1  # the pause held once the request had finished
            assert wait_for(fut.done, timeout=10)
        else:
            assert r.json()["num_requests"] == 1, r.text
            time.sleep(0.3)
            assert not fut.done()
        post(server, "/continue_generation")
        choice = fut.result(timeout=60)
    # Kept, retracted (recomputed) or waited for: the same greedy output, bit for bit.
    assert choice["finish_reason"] == "length"
    assert choice["text"] == base["text"]
    assert choice["logprobs"]["token_logprobs"] == base["logprobs"]["token_logprobs"]


def test_pause_mode_is_checked(server):
    r = post(server, "/pause_generation", {"mode": "later"})
    assert r.status_code == 400 and "mode must be one of" in r.text


def test_flush_cache(server):
    complete(server, max_tokens=2)
    r = post(server, "/flush_cache")
    assert r.status_code == 200 and r.json()["success"], r.text
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fut = pool.submit(complete, server, max_tokens=300)
        assert wait_for(lambda: running(server) >= 1)
        r = post(server, "/flush_cache")
        assert r.status_code == 400 and "pause generation first" in r.text
        assert post(server, "/pause_generation", {"mode": "in_place"}).status_code == 200
        assert post(server, "/flush_cache").status_code == 200
        post(server, "/continue_generation")
        assert fut.result(timeout=60)["finish_reason"] == "length"


# ---- logprob agreement ----------------------------------------------------------------------------------

def test_sampled_logprobs_equal_rescored_bit_for_bit(server):
    sampled = complete(server, max_tokens=10, temperature=1.0, top_p=1.0, top_k=-1, seed=1234, logprobs=0,
                       return_tokens_as_token_ids=True)
    ids = [int(t.split(":")[1]) for t in sampled["logprobs"]["tokens"]]
    got = sampled["logprobs"]["token_logprobs"]
    rescored = complete(server, prompt=PROMPT + ids, max_tokens=1, echo=True, logprobs=0,
                        return_tokens_as_token_ids=True)
    prompt_lp = rescored["logprobs"]["token_logprobs"][: len(PROMPT) + len(ids)]
    assert prompt_lp[len(PROMPT):] == got  # bit for bit (the same floats)
    want = reference_logprobs(read_raw(), PROMPT + ids)
    for i, tok in enumerate(ids):
        assert abs(got[i] - want[len(PROMPT) - 1 + i, tok]) <= BOUND
    for p in range(1, len(PROMPT)):
        assert abs(prompt_lp[p] - want[p - 1, PROMPT[p]]) <= BOUND


# ---- routed experts and routing replay ------------------------------------------------------------------

def test_routed_experts_and_replay(server):
    c = complete(server, max_tokens=6, logprobs=0, return_routed_experts=True, return_tokens_as_token_ids=True)
    ids = [int(t.split(":")[1]) for t in c["logprobs"]["tokens"]]
    routed = decode_routed(c["routed_experts"])
    full = PROMPT + ids
    assert routed.shape == (len(full) - 1, 2, 2)  # every position the model ran, layers, top_k
    # The float64 reference picks the same experts (up to order within a position).
    want = []
    reference_logprobs(read_raw(), full[:-1], routed=want)
    assert np.array_equal(np.sort(routed, axis=2), np.sort(want[0], axis=2))

    # Re-scoring with that routing replayed: the same logprobs and routing, bit for bit.
    plain = complete(server, prompt=full, max_tokens=1, echo=True, logprobs=0, return_routed_experts=True)
    replayed = complete(server, prompt=full, max_tokens=1, echo=True, logprobs=0, return_routed_experts=True,
                        routing_replay=c["routed_experts"])
    assert plain["logprobs"]["token_logprobs"] == replayed["logprobs"]["token_logprobs"]
    assert np.array_equal(decode_routed(plain["routed_experts"])[: len(full) - 1], routed)
    assert np.array_equal(decode_routed(replayed["routed_experts"]), decode_routed(plain["routed_experts"]))

    # Another routing: the other two experts everywhere (4 experts, top 2).
    other = np.array([[sorted(set(range(4)) - set(row)) for row in pos] for pos in routed])
    forced = complete(server, prompt=full, max_tokens=1, echo=True, logprobs=0, return_routed_experts=True,
                      routing_replay=encode_routed(other))
    assert np.array_equal(decode_routed(forced["routed_experts"])[: len(other)], other)
    want_lp = reference_logprobs(read_raw(), full, forced=other)
    got = forced["logprobs"]["token_logprobs"]
    for p in range(1, len(full)):
        assert abs(got[p] - want_lp[p - 1, full[p]]) <= BOUND
    assert max(abs(a - b) for a, b in zip(got[1:], plain["logprobs"]["token_logprobs"][1:])) > 1e-2


def test_routed_experts_in_chat_and_streams(server):
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
            "temperature": 0, "ignore_eos": True, "return_routed_experts": True}
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    u = r.json()["usage"]
    routed = decode_routed(r.json()["choices"][0]["routed_experts"])
    assert routed.shape == (u["prompt_tokens"] + u["completion_tokens"] - 1, 2, 2)
    with httpx.stream("POST", server.url + "/v1/chat/completions", json={**body, "stream": True}, timeout=60) as s:
        text = "".join(s.iter_text())
    assert '"routed_experts"' in text
    with httpx.stream("POST", server.url + "/v1/completions", timeout=60,
                      json={"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 3, "stream": True,
                            "return_routed_experts": True}) as s:
        text = "".join(s.iter_text())
    assert text.count('"routed_experts"') == 1


def test_routing_fields_are_checked(server):
    bad = {"encoding": "base64", "dtype": "uint8", "shape": [len(PROMPT) + 1, 2, 2],
           "data": encode_routed(np.zeros((len(PROMPT) + 1, 2, 2)) + [0, 1])["data"]}
    for replay, needle in [(bad, "covers 11 positions but the prompt has 10 tokens"),
                           ({**bad, "shape": [1, 3, 2]}, "routing_replay.shape"),
                           (encode_routed(np.zeros((2, 2, 2))), "given twice"),
                           (encode_routed(np.full((1, 2, 2), 9)), "outside [0, 4)"),
                           ("x", "must be an object")]:
        r = httpx.post(server.url + "/v1/completions", timeout=30,
                       json={"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 1, "routing_replay": replay})
        assert r.status_code == 400 and needle in r.text, (needle, r.text)
    r = httpx.post(server.url + "/v1/completions", timeout=30,
                   json={"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 1, "return_routed_experts": "yes"})
    assert r.status_code == 400 and "return_routed_experts" in r.text
