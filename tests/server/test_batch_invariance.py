"""`m2cpp serve --batch-invariant` (vLLM's flag; issue 29 point 5): a
prompt's logprobs, the prompt's (echo) and a greedy completion's with their
top alternatives, are bit-identical

- alone, and fired together with 15 other requests (their prefill chunks and
  decode rows share its steps, at whatever place in the batch it lands),
- with its prefill in one step, and chunked by --max-num-batched-tokens 32,
- from a fresh prefill and from the prefix cache.

The CPU backend is batch-invariant by construction, so in `make test` this
holds the engine and server to it (nothing may depend on step composition);
with M2CPP_TEST_SERVE_ARGS="--device cuda" the same file checks the GPU's
batch-invariant kernels (tests/backend/cuda/batch_invariance_test.cpp holds
them op path by op path at the FP8 shapes). JSON numbers are written with
round-trip precision, so equal text is equal floats."""
import concurrent.futures
import random

import httpx
import pytest

from live_server import MODEL_NAME, ServerProcess

_rng = random.Random(29)
PROMPT = [_rng.randrange(10, 4000) for _ in range(150)]
OTHERS = [[_rng.randrange(10, 4000) for _ in range(_rng.randrange(20, 300))] for _ in range(15)]


@pytest.fixture(scope="module")
def whole():
    s = ServerProcess("--batch-invariant", "--no-enable-prefix-caching")
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


@pytest.fixture(scope="module")
def chunked():
    s = ServerProcess("--batch-invariant", "--max-num-batched-tokens", "32")
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


def score(server, prompt, max_tokens=8):
    body = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "echo": True, "logprobs": 2, "return_tokens_as_token_ids": True}
    r = httpx.post(server.url + "/v1/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    lp = r.json()["choices"][0]["logprobs"]
    return lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]


def amid_others(server, place):
    """The prompt fired together with the others, submitted at `place` among them."""
    order = OTHERS[:place] + [PROMPT] + OTHERS[place:]
    with concurrent.futures.ThreadPoolExecutor(len(order)) as pool:
        futures = [pool.submit(score, server, p, 8 if i == place else 4 + i % 9) for i, p in enumerate(order)]
        return futures[place].result()


def test_alone_and_amid_others_bit_identical(whole):
    alone = score(whole, PROMPT)
    assert len(alone[0]) == len(PROMPT) + 8
    for place in (0, 7, 15):
        assert amid_others(whole, place) == alone, f"submitted at place {place} of 16"


def test_chunked_prefill_and_prefix_cache_bit_identical(whole, chunked):
    alone = score(whole, PROMPT)
    first = score(chunked, PROMPT)  # prefill in chunks of <= 32 tokens
    assert first == alone
    assert score(chunked, PROMPT) == alone  # the prompt's blocks from the prefix cache
    assert amid_others(chunked, 5) == alone
